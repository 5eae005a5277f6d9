import { isBsuid } from "../channel/identity.ts";
import { type GraphMessageTemplate, placeholderCount, TEMPLATE_CATALOGUE } from "./catalogue.ts";
import { GRAPH_ERRORS, GraphError } from "./errors.ts";
import type { SendBody, SendTemplate, TemplateComponentParameters, TemplateParameter } from "./schemas.ts";

/**
 * A send body checked like Graph checks it, beyond its schema: the recipient, a text's length, and a
 * template's name, language and every component's parameters against the catalogue.
 */

const TEXT_BODY_LIMIT = 4096;

/** Uploaded media id -> the phone number id it was uploaded for. */
type Uploads = ReadonlyMap<string, string>;

function isHttpUrl(value: string): boolean {
  return URL.canParse(value) && /^https?:$/.test(new URL(value).protocol);
}

function checkTextParameters(where: string, parameters: TemplateParameter[]) {
  for (const parameter of parameters) {
    if (parameter.type !== "text") {
      throw new GraphError(132012, `${where}: expected a text parameter, got ${parameter.type}.`);
    }
    if (!parameter.text) throw new GraphError(131008, `${where}: a text parameter needs a non-empty text.`);
    if (/[\n\t]| {5,}/.test(parameter.text)) {
      throw new GraphError(132018, `${where}: ${GRAPH_ERRORS[132018]?.details}`);
    }
  }
}

function checkCount(where: string, expected: number, parameters: TemplateParameter[]) {
  if (parameters.length !== expected) {
    throw new GraphError(132000, `${where}: expected ${expected} parameters, got ${parameters.length}.`);
  }
}

function checkHeader(
  template: GraphMessageTemplate,
  given: TemplateComponentParameters | undefined,
  phoneNumberId: string,
  uploads: Uploads,
) {
  const header = template.components.find((component) => component.type === "HEADER");
  const parameters = given?.parameters ?? [];
  if (!header) {
    checkCount("header", 0, parameters);
    return;
  }
  if (header.format === "TEXT") {
    checkCount("header", placeholderCount(header.text), parameters);
    checkTextParameters("header", parameters);
    return;
  }
  checkCount("header", 1, parameters);
  const kind = header.format.toLowerCase() as "image" | "video" | "document";
  const parameter = parameters[0]!;
  if (parameter.type !== kind) {
    throw new GraphError(132012, `header: expected a ${kind} parameter, got ${parameter.type}.`);
  }
  const media = parameter[kind];
  if (!media?.id && !media?.link) {
    throw new GraphError(131008, `header: the ${kind} needs an id or a link.`);
  }
  if (media.id && media.link) {
    throw new GraphError(100, `header: give the ${kind} an id or a link, not both.`);
  }
  if (media.link && !isHttpUrl(media.link)) {
    throw new GraphError(131009, `header: the ${kind} link must be an http(s) URL.`);
  }
  if (media.id && uploads.get(media.id) !== phoneNumberId) {
    throw new GraphError(
      131009,
      `header: media id ${media.id} was not uploaded for phone number ${phoneNumberId}.`,
    );
  }
}

function checkButtons(template: GraphMessageTemplate, given: Map<number, TemplateComponentParameters>) {
  const buttons = template.components.find((component) => component.type === "BUTTONS")?.buttons ?? [];
  const dynamicUrlPlaceholders = (index: number) => {
    const button = buttons[index];
    return button?.type === "URL" ? placeholderCount(button.url) : 0;
  };
  for (const [index, component] of given) {
    if (component.sub_type?.toLowerCase() !== "url" || dynamicUrlPlaceholders(index) === 0) {
      throw new GraphError(132000, `button ${index}: the template has no dynamic URL button at this index.`);
    }
  }
  buttons.forEach((_, index) => {
    const expected = dynamicUrlPlaceholders(index);
    if (expected === 0) return;
    const parameters = given.get(index)?.parameters ?? [];
    checkCount(`button ${index}`, expected, parameters);
    checkTextParameters(`button ${index}`, parameters);
  });
}

/** Validates a template send like Graph: name and language, then every component's parameters. */
function checkTemplate(
  template: SendTemplate,
  phoneNumberId: string,
  uploads: Uploads,
): GraphMessageTemplate {
  const entry = TEMPLATE_CATALOGUE.find(
    (candidate) => candidate.name === template.name && candidate.language === template.language.code,
  );
  if (entry?.status !== "APPROVED") {
    throw new GraphError(
      132001,
      `template name (${template.name}) does not exist in ${template.language.code} or is not approved.`,
    );
  }
  const components = template.components ?? [];
  const single = (type: "header" | "body") => {
    const matching = components.filter((component) => component.type === type);
    if (matching.length > 1) throw new GraphError(100, `${type}: given more than once.`);
    return matching[0];
  };
  const buttons = new Map<number, TemplateComponentParameters>();
  for (const component of components.filter((candidate) => candidate.type === "button")) {
    const index = Number(component.index);
    if (component.index === undefined || !Number.isInteger(index) || index < 0) {
      throw new GraphError(131008, "button: a button component needs a numeric index.");
    }
    if (buttons.has(index)) throw new GraphError(100, `button ${index}: given more than once.`);
    buttons.set(index, component);
  }
  const body = single("body");
  checkHeader(entry, single("header"), phoneNumberId, uploads);
  const bodyText = entry.components.find((component) => component.type === "BODY")?.text ?? "";
  checkCount("body", placeholderCount(bodyText), body?.parameters ?? []);
  checkTextParameters("body", body?.parameters ?? []);
  checkButtons(entry, buttons);
  return entry;
}

/** Whom a send is for: a phone (`to`, digits) or a BSUID (`recipient`). */
export type SendAddress = { waId: string } | { userId: string };

function checkAddress(body: SendBody): SendAddress {
  if (body.to !== undefined && body.recipient !== undefined) {
    throw new GraphError(100, "Give the parameter to (a phone number) or recipient (a user ID), not both.");
  }
  if (body.recipient !== undefined) {
    if (!isBsuid(body.recipient)) {
      throw new GraphError(100, `Param recipient (${body.recipient}) is not a business-scoped user ID.`);
    }
    return { userId: body.recipient };
  }
  if (body.to === undefined) throw new GraphError(100, "The parameter to or recipient is required.");
  const waId = body.to.replace(/[\s()+-]/g, "");
  if (!/^\d{7,15}$/.test(waId)) throw new GraphError(100, `Param to (${body.to}) is not a phone number.`);
  return { waId };
}

export function checkSend(
  body: SendBody,
  phoneNumberId: string,
  uploads: Uploads,
): { address: SendAddress; summary: string } {
  const address = checkAddress(body);
  const type = body.type ?? "text";
  if (type === "text") {
    if (!body.text?.body) throw new GraphError(100, "The parameter text['body'] is required.");
    if (body.text.body.length > TEXT_BODY_LIMIT) {
      throw new GraphError(100, `Param text['body'] must be at most ${TEXT_BODY_LIMIT} characters long.`);
    }
    return { address, summary: "text" };
  }
  if (type === "template") {
    if (!body.template) throw new GraphError(100, "The parameter template is required.");
    const entry = checkTemplate(body.template, phoneNumberId, uploads);
    if (entry.category === "AUTHENTICATION" && "userId" in address) {
      throw new GraphError(
        100,
        `Template ${entry.name} is an authentication template: send it to a phone number (to).`,
      );
    }
    return { address, summary: `template ${entry.name}/${entry.language}` };
  }
  throw new GraphError(100, `Param type (${type}): the simulator accepts text and template messages.`);
}
