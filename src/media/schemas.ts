import { t } from "elysia";

export const UploadMediaBody = t.Object(
  {
    file: t.File({
      description:
        "PDF, JPEG, PNG, MP4 or 3GPP, recognised by its content (not its name or Content-Type). At most 5 MB for images, 16 MB for video and documents.",
    }),
    sender: t.Optional(
      t.String({ description: "`snd_` id; may be left out when the account has exactly one active sender." }),
    ),
    filename: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 255,
        description:
          "Name shown to the recipient, mainly for documents; defaults to the uploaded document's name.",
      }),
    ),
  },
  { title: "UploadMediaRequest" },
);

export const MediaObject = t.Object(
  {
    object: t.Literal("media"),
    id: t.String({ description: "`med_` handle; send it as `template.header.media`." }),
    type: t.Union([t.Literal("image"), t.Literal("video"), t.Literal("document")]),
    filename: t.Nullable(t.String()),
    mime_type: t.String({ description: "Judged from the file's content." }),
    created: t.Integer({ description: "Unix epoch seconds." }),
    expires_at: t.String({
      format: "date-time",
      description: "When the handle stops being usable (30 days after upload), ISO 8601 UTC.",
    }),
  },
  {
    title: "Media",
    description: "An uploaded file's handle, usable as `template.header.media`.",
    examples: [
      {
        object: "media",
        id: "med_5Gh7Jk9Lm1Np3Qr5St7Uv9",
        type: "document",
        filename: "invoice-A-1.pdf",
        mime_type: "application/pdf",
        created: 1767225600,
        expires_at: "2026-01-31T00:00:00.000Z",
      },
    ],
  },
);
