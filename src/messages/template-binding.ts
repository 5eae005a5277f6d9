import type { OutboundHeader, OutboundPayload } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { publicHttpsUrlProblem } from "../lib/public-url.ts";
import { findUsableMedia } from "../media/service.ts";
import type { SenderRow } from "../senders/repository.ts";
import { storedComponents, type TemplateRow } from "../templates/repository.ts";
import {
  bodyText,
  headerFormat,
  headerText,
  templateButtons,
  templateVariables,
} from "../templates/variables.ts";

/**
 * The template part of a send (SPEC §4, DESIGN §3): the approved template by name and language,
 * its variables checked by count and name against what the template declares, the header and
 * buttons bound, the text rendered for history, and the provider's components built.
 */

export interface TemplateRequest {
  name: string;
  language?: string;
  variables?: { body?: Record<string, string> | string[] };
  header?:
    | string
    | { type: "image" | "video" | "document"; link?: string; media?: string; filename?: string };
  buttons?: Record<string, string>;
}

export type TemplateComponents = Extract<OutboundPayload, { kind: "template" }>["components"];

export interface BoundTemplate {
  template: TemplateRow;
  components: TemplateComponents;
  /** The message as the customer reads it (header line, then body), placeholders filled. */
  rendered: string;
}

/** The approved template a request names, among the sender's approved templates of that name. */
export function chooseTemplate(approved: readonly TemplateRow[], request: TemplateRequest): TemplateRow {
  if (approved.length === 0) {
    throw new ApiError(
      "template_not_found",
      `No approved template named ${JSON.stringify(request.name)} for this sender.`,
      {
        param: "template.name",
      },
    );
  }
  if (request.language === undefined) {
    if (approved.length > 1) {
      throw new ApiError(
        "parameter_missing",
        `Template ${request.name} is approved in several languages (${approved.map((t) => t.language).join(", ")}); give template.language.`,
        { param: "template.language" },
      );
    }
    return approved[0]!;
  }
  const match = approved.find((t) => t.language === request.language);
  if (!match) {
    throw new ApiError(
      "template_not_found",
      `Template ${request.name} is not approved in language ${JSON.stringify(request.language)} (approved: ${approved.map((t) => t.language).join(", ")}).`,
      { param: "template.name" },
    );
  }
  return match;
}

// WhatsApp refuses parameters with line breaks, tabs or more than four spaces in a row (132018).
const PARAMETER_FORBIDDEN = /[\n\r\t]| {5,}/;
const PARAMETER_MAX = 1024;

function checkParameter(value: unknown, param: string): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new ApiError("parameter_invalid", `${param} must be a non-empty string.`, { param });
  }
  if (value.length > PARAMETER_MAX || PARAMETER_FORBIDDEN.test(value)) {
    throw new ApiError(
      "parameter_invalid",
      `${param} may hold at most ${PARAMETER_MAX} characters, without line breaks, tabs or more than four spaces in a row.`,
      { param },
    );
  }
  return value;
}

/** Values for `names`, from the array (in order) or the object (by name) form; exact names only. */
function bindNamed(
  names: string[],
  given: Record<string, string> | string[] | undefined,
  path: string,
): string[] {
  if (given === undefined) {
    if (names.length > 0)
      throw new ApiError("parameter_missing", `The template needs ${path}.${names[0]}.`, {
        param: `${path}.${names[0]}`,
      });
    return [];
  }
  if (Array.isArray(given)) {
    if (given.length !== names.length) {
      throw new ApiError(
        "parameter_invalid",
        `${path} must have ${names.length} value${names.length === 1 ? "" : "s"} (${names.join(", ") || "none"}), got ${given.length}.`,
        { param: path },
      );
    }
    return given.map((value, i) => checkParameter(value, `${path}.${i}`));
  }
  for (const key of Object.keys(given)) {
    if (!names.includes(key)) {
      throw new ApiError(
        "parameter_invalid",
        `The template has no variable ${key} here; it takes: ${names.join(", ") || "none"}.`,
        { param: `${path}.${key}` },
      );
    }
  }
  return names.map((name) => {
    if (!(name in given)) {
      throw new ApiError("parameter_missing", `Missing template variable ${path}.${name}.`, {
        param: `${path}.${name}`,
      });
    }
    return checkParameter(given[name], `${path}.${name}`);
  });
}

function fill(text: string, names: string[], values: string[]): string {
  return text.replace(/\{\{([A-Za-z0-9_]+)\}\}/g, (whole, name: string) => {
    const index = names.indexOf(name);
    return index >= 0 ? (values[index] ?? whole) : whole;
  });
}

/** Sample media of a media header (the template's own example), used when `template.header` is omitted. */
function sampleHeaderLink(template: TemplateRow): string | undefined {
  const header = storedComponents(template).find((c) => c.type === "HEADER");
  const example =
    header && "example" in header ? (header.example as { header_handle?: string[] } | undefined) : undefined;
  return example?.header_handle?.[0];
}

export async function bindTemplate(
  deps: { db: Db; now: Date },
  sender: SenderRow,
  template: TemplateRow,
  request: TemplateRequest,
): Promise<BoundTemplate> {
  const components = storedComponents(template);
  const variables = templateVariables(components);
  const body = bindNamed(variables.body, request.variables?.body, "template.variables.body");
  const bound: TemplateComponents = {};
  if (body.length > 0) bound.body = body;

  const format = headerFormat(components);
  let headerLine: string | null = null;
  if (format === "TEXT") {
    const text = headerText(components) ?? "";
    if (variables.header.length > 0) {
      if (typeof request.header !== "string") {
        throw new ApiError(
          request.header === undefined ? "parameter_missing" : "parameter_invalid",
          "This template's TEXT header takes one variable: give template.header as a string.",
          { param: "template.header" },
        );
      }
      const value = checkParameter(request.header, "template.header");
      bound.header = { type: "text", text: value };
      headerLine = fill(text, variables.header, [value]);
    } else {
      if (request.header !== undefined) {
        throw new ApiError("parameter_invalid", "This template's header has no variable.", {
          param: "template.header",
        });
      }
      headerLine = text;
    }
  } else if (format === "IMAGE" || format === "VIDEO" || format === "DOCUMENT") {
    bound.header = await bindMediaHeader(
      deps,
      sender,
      template,
      format.toLowerCase() as "image" | "video" | "document",
      request.header,
    );
  } else if (request.header !== undefined) {
    throw new ApiError("parameter_invalid", "This template has no header.", { param: "template.header" });
  }

  const buttons = templateButtons(components);
  const buttonValues = bindNamed(variables.buttons, request.buttons, "template.buttons");
  if (buttonValues.length > 0) {
    bound.buttons = variables.buttons.map((index, i) => ({ index: Number(index), text: buttonValues[i]! }));
  }
  void buttons;

  const bodyLine = fill(bodyText(components), variables.body, body);
  return { template, components: bound, rendered: headerLine ? `${headerLine}\n${bodyLine}` : bodyLine };
}

async function bindMediaHeader(
  deps: { db: Db; now: Date },
  sender: SenderRow,
  template: TemplateRow,
  kind: "image" | "video" | "document",
  given: TemplateRequest["header"],
): Promise<OutboundHeader> {
  if (given === undefined) {
    const link = sampleHeaderLink(template);
    if (!link) {
      throw new ApiError("parameter_missing", `This template's ${kind} header needs template.header.`, {
        param: "template.header",
      });
    }
    return { type: kind, link };
  }
  if (typeof given === "string") {
    throw new ApiError(
      "parameter_invalid",
      `This template's header is a ${kind}: give {type, link or media}.`,
      {
        param: "template.header",
      },
    );
  }
  if (given.type !== kind) {
    throw new ApiError("parameter_invalid", `This template's header is a ${kind}, not ${given.type}.`, {
      param: "template.header.type",
    });
  }
  if (given.link !== undefined && given.media !== undefined) {
    throw new ApiError(
      "parameter_conflict",
      "Give template.header.link or template.header.media, not both.",
      {
        param: "template.header",
      },
    );
  }
  const filename = kind === "document" ? given.filename : undefined;
  if (given.media !== undefined) {
    const media = await findUsableMedia(deps.db, sender.tenant_id, sender.id, given.media, deps.now);
    if (media.type !== kind) {
      throw new ApiError("parameter_invalid", `Media ${given.media} is a ${media.type}, not a ${kind}.`, {
        param: "template.header.media",
      });
    }
    return {
      type: kind,
      mediaId: media.provider_media_id,
      filename: filename ?? media.filename ?? undefined,
    };
  }
  if (given.link === undefined) {
    throw new ApiError(
      "parameter_missing",
      "Give template.header.link (a public https URL) or template.header.media.",
      {
        param: "template.header.link",
      },
    );
  }
  const problem = publicHttpsUrlProblem(given.link);
  if (problem) {
    throw new ApiError("parameter_invalid", `template.header.link ${problem}: give a public https URL.`, {
      param: "template.header.link",
    });
  }
  return { type: kind, link: given.link, filename };
}
