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

export const TemplateHeaderSchema = t.Object(
  {
    format: t.Union(
      [t.Literal("none"), t.Literal("text"), t.Literal("image"), t.Literal("video"), t.Literal("document")],
      {
        description:
          "`none`: no header. `text`: give `template.header` as a string when `variables.header` names a variable. `image`/`video`/`document`: give `template.header` as `{type, link | media}` (default: the template's sample).",
      },
    ),
  },
  { title: "TemplateHeader", description: "The template's header, as `template.header` on a send fills it." },
);

export const TemplateButtonSchema = t.Object(
  {
    type: t.Union([t.Literal("url"), t.Literal("quick_reply"), t.Literal("phone_number")]),
    text: t.String({ description: "The button's label." }),
    url: t.Optional(
      t.String({
        description:
          "`url` buttons: the address; a `{{1}}` in it is filled from `template.buttons` on a send, keyed by this button's index.",
      }),
    ),
    phone_number: t.Optional(t.String({ description: "`phone_number` buttons: the number called." })),
  },
  {
    title: "TemplateButton",
    description: "A button of the template, in order; its index is its key in `template.buttons`.",
  },
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
    header: TemplateHeaderSchema,
    buttons: t.Array(TemplateButtonSchema),
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
        header: { format: "none" },
        buttons: [{ type: "url", text: "Track", url: "https://example.com/track/{{1}}" }],
      },
    ],
  },
);
