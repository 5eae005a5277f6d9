import { t } from "elysia";

export const TemplateVariablesSchema = t.Object(
  {
    body: t.Array(t.String(), { description: "Body placeholder names to fill, e.g. `1`, `2`." }),
    header: t.Array(t.String(), { description: "Placeholder names of a TEXT header." }),
    buttons: t.Array(t.String(), {
      description: "Indexes (as strings) of URL buttons with a dynamic part: the keys of `template.buttons`.",
    }),
  },
  { title: "TemplateVariables", description: "Which variables a send of this template must fill." },
);

export const TemplateSchema = t.Object(
  {
    object: t.Literal("template"),
    id: t.String({ description: "`tpl_` id." }),
    name: t.String(),
    language: t.String({ description: "Language code, e.g. `en`." }),
    category: t.String({ description: "Lower case, e.g. `utility` or `marketing`." }),
    variables: TemplateVariablesSchema,
    preview: t.String({ description: "The body text with its `{{n}}` placeholders." }),
  },
  {
    title: "Template",
    description: "An approved template of a sender.",
    examples: [
      {
        object: "template",
        id: "tpl_9Ab3Cd5Ef7Gh9Ij1Kl3Mn",
        name: "order_shipped",
        language: "en",
        category: "utility",
        variables: { body: ["1", "2"], header: [], buttons: ["0"] },
        preview: "Hi {{1}}, your order {{2}} has shipped. Track it with the button below.",
      },
    ],
  },
);
