import type { TemplateRow } from "./repository.ts";

/** SPEC §2 Template. */
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
  };
}

/** The operator's view (CLI): any status, so it says which. */
export function presentTemplateWithStatus(template: TemplateRow) {
  return { ...presentTemplate(template), status: template.status.toLowerCase() };
}
