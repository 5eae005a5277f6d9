import type { TemplateComponent } from "../channel/provider.ts";

/**
 * The simulator's template catalogue (DESIGN §4), the same for every business account, as Graph
 * `GET /{waba-id}/message_templates` returns it: upper-case status and category, components with the
 * examples Meta requires at submission. Ids are fixed so a template sync sees the same ids every run.
 */
export interface GraphMessageTemplate {
  id: string;
  name: string;
  language: string;
  status: "APPROVED" | "PENDING" | "REJECTED";
  category: "UTILITY" | "MARKETING" | "AUTHENTICATION";
  components: TemplateComponent[];
  /** Why Meta rejected it (Graph's values: INVALID_FORMAT, PROMOTIONAL, ...); only on REJECTED ones. */
  rejected_reason?: string;
}

export const TEMPLATE_CATALOGUE: readonly GraphMessageTemplate[] = [
  {
    id: "1000000000000001",
    name: "order_shipped",
    language: "en",
    status: "APPROVED",
    category: "UTILITY",
    components: [
      {
        type: "BODY",
        text: "Hi {{1}}, your order {{2}} has shipped.",
        example: { body_text: [["Ana", "A-1001"]] },
      },
    ],
  },
  {
    id: "1000000000000002",
    name: "order_shipped",
    language: "de",
    status: "APPROVED",
    category: "UTILITY",
    components: [
      {
        type: "BODY",
        text: "Hallo {{1}}, deine Bestellung {{2}} wurde versandt.",
        example: { body_text: [["Ana", "A-1001"]] },
      },
    ],
  },
  {
    id: "1000000000000003",
    name: "invoice_ready",
    language: "en",
    status: "APPROVED",
    category: "UTILITY",
    components: [
      {
        type: "HEADER",
        format: "DOCUMENT",
        example: { header_handle: ["https://example.com/samples/invoice.pdf"] },
      },
      { type: "BODY", text: "Your invoice {{1}} is ready.", example: { body_text: [["INV-2041"]] } },
    ],
  },
  {
    id: "1000000000000004",
    name: "delivery_video",
    language: "en",
    status: "APPROVED",
    category: "UTILITY",
    components: [
      {
        type: "HEADER",
        format: "VIDEO",
        example: { header_handle: ["https://example.com/samples/packing.mp4"] },
      },
      { type: "BODY", text: "Watch how we packed order {{1}}.", example: { body_text: [["A-1001"]] } },
    ],
  },
  {
    id: "1000000000000005",
    name: "appointment_reminder",
    language: "en",
    status: "APPROVED",
    category: "UTILITY",
    components: [
      { type: "HEADER", format: "TEXT", text: "Reminder for {{1}}", example: { header_text: ["Ana"] } },
      { type: "BODY", text: "See you on {{1}} at {{2}}.", example: { body_text: [["May 4", "10:30"]] } },
      {
        type: "BUTTONS",
        buttons: [
          {
            type: "URL",
            text: "Manage appointment",
            url: "https://example.com/a/{{1}}",
            example: ["https://example.com/a/ABC123"],
          },
        ],
      },
    ],
  },
  {
    id: "1000000000000006",
    name: "welcome",
    language: "en",
    status: "APPROVED",
    category: "MARKETING",
    components: [{ type: "BODY", text: "Welcome to our service!" }],
  },
  {
    id: "1000000000000007",
    name: "summer_sale",
    language: "en",
    status: "PENDING",
    category: "MARKETING",
    components: [{ type: "BODY", text: "Sale! {{1}} off.", example: { body_text: [["20%"]] } }],
  },
  {
    id: "1000000000000008",
    name: "old_promo",
    language: "en",
    status: "REJECTED",
    category: "MARKETING",
    components: [{ type: "BODY", text: "Old promo" }],
    rejected_reason: "INVALID_FORMAT",
  },
  {
    // Authentication templates go to a phone (DESIGN §14: not to a user known by BSUID only).
    id: "1000000000000009",
    name: "login_code",
    language: "en",
    status: "APPROVED",
    category: "AUTHENTICATION",
    components: [
      { type: "BODY", text: "{{1}} is your verification code.", example: { body_text: [["123456"]] } },
    ],
  },
];

/** Number of distinct `{{n}}` placeholders in a template text. */
export function placeholderCount(text: string): number {
  return new Set(text.match(/\{\{\d+\}\}/g) ?? []).size;
}
