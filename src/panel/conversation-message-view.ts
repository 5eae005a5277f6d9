import type { MessageFailure } from "../db/schema.ts";
import { presentMessageFields } from "../history/presenter.ts";
import { failureDocLink, mediaPath } from "./conversation-markup.ts";
import type { MessageDetails, ThreadMessageRow } from "./conversation-messages.ts";
import { type Html, html } from "./html.ts";
import { mediaIcon } from "./icons.ts";

/** The parts of one message that the thread and the message page both show: media, facts, failure. */

/** "[icon] document: invoice.pdf": what a send's media, or any media in the list, shows. */
export function mediaPlaceholder(media: { type: string; filename: string | null }): Html {
  return html`${mediaIcon(media.type)} ${media.type}${media.filename ? html`: ${media.filename}` : ""}`;
}

/**
 * A received message's media, fetched from the provider when shown (issue 24): a picture as a
 * thumbnail linking to the full picture, anything else as a download link; the placeholder for a
 * message whose media the provider cannot be asked for (a send, or one received before media ids
 * were kept).
 */
export function messageMedia(row: ThreadMessageRow, contactId: string, contactName: string): Html {
  const media = presentMessageFields(row).media;
  if (!media) return html``;
  if (row.direction !== "inbound" || !row.has_media || !row.id) {
    return html`<p class="message-media">${mediaPlaceholder(media)}</p>`;
  }
  const path = mediaPath(contactId, row.id);
  if (media.type === "image") {
    return html`<p class="message-media message-image"><a href="${path}"><img src="${path}" loading="lazy" alt="Image from ${contactName}"></a></p>`;
  }
  const label = media.filename ?? `the ${media.type}`;
  return html`<p class="message-media"><a class="message-download" href="${path}" download>${mediaIcon(media.type)} Download ${label}</a></p>`;
}

export function messageFacts(row: ThreadMessageRow): Html {
  const id = row.id!;
  return html`<dl class="message-facts">
<div><dt>Id</dt><dd><code id="id-${id}">${id}</code> <button type="button" class="button subtle copy" id="copy-${id}" data-copy="#id-${id}">Copy id</button></dd></div>
${row.template_name ? html`<div><dt>Template</dt><dd>${row.template_name} <span class="muted">(${row.template_language ?? "?"})</span></dd></div>` : ""}
${row.client_reference ? html`<div><dt>Your reference</dt><dd><code>${row.client_reference}</code></dd></div>` : ""}
</dl>`;
}

/** Why a send was not delivered, with what its failure code means. */
export function notDelivered(failure: MessageFailure): Html {
  return html`<p class="message-failure"><strong>Not delivered:</strong> ${failure.message} ${failureDocLink(failure.code)}</p>`;
}

/** The message page's head of details (the timeline follows it): text, id, template, failure. */
export function renderMessageDetailsBody(
  details: MessageDetails,
  contactId: string,
  contactName: string,
): Html {
  const row = details.message;
  const message = presentMessageFields(row);
  const text = message.text ?? (message.media ? null : message.preview);
  return html`${messageMedia(row, contactId, contactName)}
${text ? html`<blockquote class="message-quote"><p class="message-text">${text}</p></blockquote>` : ""}
${row.id ? messageFacts(row) : ""}
${message.status === "failed" && message.failure ? notDelivered(message.failure) : ""}`;
}
