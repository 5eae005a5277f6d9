import type { ConversationRow } from "../conversations/repository.ts";
import { listConversations } from "../conversations/service.ts";
import type { Db } from "../db/connect.ts";
import { type ConversationListPage, conversationListPage, type ListNarrowing } from "./conversation-data.ts";
import { announcer, conversationPath, renderListRegion, renderListToolbar } from "./conversation-views.ts";
import { type Html, html } from "./html.ts";

/**
 * The conversations list as the list page and a conversation's sidebar show it, and as their poll
 * answers it: one page narrowed by the filter and search (issue 24). Beside a conversation, the
 * sidebar has the list page's filters and search (the same toolbar, narrowing the sidebar and
 * leaving the conversation open), and the open conversation stays listed (marked) even when the
 * narrowing leaves it out or it is older than the first page: opening an unread one reads it, a
 * reply ends "failed", and what is open must not vanish from beside it.
 */

export interface ListRegionOptions {
  /** An older page (epoch seconds); only the first page polls. */
  before?: number;
  /** The conversation open beside the list. */
  current?: string;
  narrowing?: ListNarrowing;
}

/** One contact's conversation row (the list's own query, narrowed to the contact: with a phone or without). */
async function conversationRowOf(
  db: Db,
  tenantId: string,
  contactId: string,
  now: Date,
): Promise<ConversationRow | undefined> {
  const { rows } = await listConversations(db, tenantId, {
    order: "desc",
    limit: 1,
    narrow: { contactId, now },
  });
  return rows.find((row) => row.contact_id === contactId);
}

/** The page with `row` in its place, newest first (at the end when it is older than the page). */
function withRow(page: ConversationListPage, row: ConversationRow): ConversationListPage {
  const rows = [...page.conversations];
  const at = rows.findIndex((other) => other.last_message_at.getTime() < row.last_message_at.getTime());
  rows.splice(at < 0 ? rows.length : at, 0, row);
  return { ...page, conversations: rows };
}

/** The list region (`#conversation-list`): its markup, its version (for the poll) and unread count. */
export async function listRegion(db: Db, tenantId: string, now: Date, options: ListRegionOptions) {
  const { before, current, narrowing } = options;
  let page = await conversationListPage(db, tenantId, before, narrowing, now);
  let pinned: string | undefined;
  // Beside a conversation that the narrowing leaves out, or that is older than the first page.
  if (current !== undefined && before === undefined) {
    if (!page.conversations.some((row) => row.contact_id === current)) {
      const row = await conversationRowOf(db, tenantId, current, now);
      if (row) {
        page = withRow(page, row);
        pinned = current;
      }
    }
  }
  return renderListRegion({ page, now, poll: before === undefined, before, current, narrowing, pinned });
}

/**
 * A conversation's sidebar: the list page's toolbar (its filters and search narrow this page's
 * sidebar, the conversation stays open) above the list region.
 */
export function renderSidebar(contactId: string, narrowing: ListNarrowing, region: Html): Html {
  return html`<aside class="conversation-sidebar" aria-labelledby="sidebar-title">
<h2 id="sidebar-title" class="visually-hidden">All conversations</h2>
${renderListToolbar(narrowing, conversationPath(contactId))}
${announcer("conversations-announce")}
${region}
</aside>`;
}
