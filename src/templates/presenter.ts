import type { TemplateButton } from "../channel/provider.ts";
import { storedComponents, type TemplateRow } from "./repository.ts";
import { type HeaderFormat, templateButtons } from "./variables.ts";

/** A button as the API names it: lower-case type, as on the send request. */
function presentButton(button: TemplateButton) {
  const base = { type: button.type.toLowerCase() as Lowercase<TemplateButton["type"]>, text: button.text };
  if (button.type === "URL") return { ...base, url: button.url };
  if (button.type === "PHONE_NUMBER") return { ...base, phone_number: button.phone_number };
  return base;
}

/** SPEC §2 Template, plus the header and buttons the panel shows. */
export function presentTemplate(template: TemplateRow) {
  return {
    object: "template" as const,
    id: template.id,
    name: template.name,
    language: template.language,
    category: template.category.toLowerCase(),
    variables: {
      body: template.variables.body,
      header: template.variables.header,
      buttons: template.variables.buttons,
    },
    preview: template.preview,
    // The sync stores the provider's HEADER format (src/templates/variables.ts headerFormat).
    header: { format: (template.header_format?.toLowerCase() ?? "none") as "none" | Lowercase<HeaderFormat> },
    buttons: templateButtons(storedComponents(template)).map(presentButton),
  };
}

/** The operator's view (CLI): any status, so it says which. */
export function presentTemplateWithStatus(template: TemplateRow) {
  return {
    ...presentTemplate(template),
    status: template.status.toLowerCase(),
    ...(template.rejected_reason && { rejected_reason: template.rejected_reason }),
  };
}
