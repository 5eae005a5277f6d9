import type { TProperties, TSchema } from "@sinclair/typebox";
import { t } from "elysia";

/** SPEC §2 list envelope around `item`; `extra` adds members (the feed's `next_cursor`). */
export function listOf<T extends TSchema, E extends TProperties = Record<never, never>>(
  item: T,
  description: string,
  extra?: E,
) {
  return t.Object(
    {
      object: t.Literal("list"),
      url: t.String({ description: "The request path." }),
      has_more: t.Boolean({ description: "Whether more items exist beyond this page." }),
      data: t.Array(item),
      ...(extra ?? ({} as E)),
    },
    { description },
  );
}

/** SPEC §7's envelope, for the OpenAPI document; the pipeline renders it. */
export const ErrorResponse = t.Object({
  error: t.Object(
    {
      type: t.String(),
      code: t.String(),
      message: t.String(),
      param: t.Nullable(t.String()),
      request_id: t.String(),
      doc_url: t.String(),
    },
    { additionalProperties: true },
  ),
});
