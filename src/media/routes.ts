import type { AppDeps } from "../app-deps.ts";
import { MEDIA_BODY_LIMIT, storableValue } from "../http/body.ts";
import { ApiError } from "../http/errors.ts";
import { authorize, type Scope } from "../http/request-state.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { presentMedia } from "./presenter.ts";
import { MediaObject, UploadMediaBody } from "./schemas.ts";
import { uploadMedia } from "./service.ts";

const UPLOAD_SCOPE: Scope = "messaging:send";

export function mediaRoutes(deps: AppDeps) {
  return apiRoutes().post(
    "/media",
    async ({ auth, body, set }) => {
      const media = await uploadMedia(deps, auth.tenantId, body);
      set.status = 201;
      return presentMedia(media);
    },
    {
      policy: { limit: "send", body: "media" },
      scope: UPLOAD_SCOPE,
      // readUploadForm sees only multipart bodies (the pipeline's parser takes every other type) and
      // always answers; the named parser after it is never reached and is what OpenAPI documents.
      parse: [({ request }) => readUploadForm(request), "multipart/form-data"],
      transform: ({ request }) => requireMultipart(request),
      body: UploadMediaBody,
      response: {
        201: MediaObject,
        ...standardErrors(
          "parameter_missing",
          "parameter_invalid",
          "parameter_unknown",
          "invalid_content_type",
          "unsupported_media_type",
          "file_too_large",
          "resource_missing",
        ),
      },
      detail: {
        operationId: "uploadMedia",
        summary: "Upload a file",
        description:
          "Uploads a PDF, image (JPEG, PNG) or video (MP4, 3GPP) as multipart/form-data for one sender and returns a `med_` handle, usable as `template.header.media` for about 30 days (`expires_at`). The type is judged by the file's content. Limits: images 5 MB, video and documents 16 MB.",
        tags: ["Media"],
        requestBody: {
          content: {
            "multipart/form-data": {
              encoding: {
                file: { contentType: "application/pdf, image/jpeg, image/png, video/mp4, video/3gpp" },
              },
            },
          },
        },
        responses: { 201: { description: "Uploaded; the handle to send as `template.header.media`." } },
      },
    },
  );
}

/**
 * Reads the multipart body here rather than with Elysia's parser, so that a body without
 * Content-Length (chunked) is counted as it arrives and refused once it passes MEDIA_BODY_LIMIT: the
 * pipeline can only check a declared length, and Bun.serve's own cap is twice the limit and answers a
 * bare 413. Fields come back as sent (no JSON decoding of values, no dotted-name nesting).
 */
async function readUploadForm(request: Request): Promise<Record<string, FormDataEntryValue>> {
  // Parsing runs before the scope guard: a caller who may not upload gets 401/403 without a byte read.
  authorize(request, UPLOAD_SCOPE);
  let received = 0;
  const counted = request.body?.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        received += chunk.byteLength;
        if (received > MEDIA_BODY_LIMIT) controller.error(new Error("upload over the body limit"));
        else controller.enqueue(chunk);
      },
    }),
  );
  let form: FormData;
  try {
    form = await new Response(counted, {
      headers: { "content-type": request.headers.get("content-type") ?? "" },
    }).formData();
  } catch {
    if (received > MEDIA_BODY_LIMIT) {
      throw new ApiError("file_too_large", "Files may be at most 16 MB.", { param: "file" });
    }
    throw new ApiError("parameter_invalid", "The multipart/form-data body could not be parsed.");
  }

  const fields = new Map<string, FormDataEntryValue>();
  for (const [name, value] of form) {
    if (fields.has(name)) {
      throw new ApiError("parameter_invalid", `${name} was given more than once.`, { param: name });
    }
    if (name === "file" && typeof value === "string") {
      throw new ApiError(
        "parameter_invalid",
        "file must be a file part (with a filename), not a text field.",
        {
          param: "file",
        },
      );
    }
    // Postgres stores no NUL or lone surrogate (src/http/body.ts): refused before anything is uploaded.
    storableValue(typeof value === "string" ? value : value.name, "refuse", [name]);
    fields.set(name, value);
  }
  // fromEntries defines own properties, so a field named __proto__ is just an unknown field.
  return Object.fromEntries(fields);
}

/** JSON, form-urlencoded or empty bodies reach the route parsed by the pipeline; they carry no file. */
function requireMultipart(request: Request): void {
  // Route transforms run before the scope guard's; 401/403 still come first.
  authorize(request, UPLOAD_SCOPE);
  const type = (request.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "multipart/form-data") {
    throw new ApiError(
      "invalid_content_type",
      `Content-Type ${type || "(none)"} is not accepted here; upload the file as multipart/form-data.`,
    );
  }
}
