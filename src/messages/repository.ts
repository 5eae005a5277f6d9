import { CONTACT_REF_COLUMNS } from "../contacts/repository.ts";
import type { Db } from "../db/connect.ts";
import { RETRY_STATE_COLUMNS } from "../history/repository.ts";
import type { StoredMessageRow } from "./presenter.ts";

/** A message of the tenant by its id, inbound or outbound, with its contact. */
export function findMessage(db: Db, tenantId: string, id: string): Promise<StoredMessageRow | undefined> {
  return (
    db
      .selectFrom("messages")
      .innerJoin("contacts", "contacts.id", "messages.contact_id")
      .select([
        "messages.id",
        "messages.direction",
        "messages.status",
        "messages.failure",
        "messages.sender_id",
        "messages.content",
        "messages.preview",
        "messages.client_reference",
        "messages.send_at",
        "messages.valid_for",
        "messages.created_at",
        ...RETRY_STATE_COLUMNS,
        ...CONTACT_REF_COLUMNS,
      ])
      .where("messages.tenant_id", "=", tenantId)
      .where("messages.id", "=", id)
      // Found by its id, so it has one (only legacy rows have none).
      .$narrowType<{ id: string }>()
      .executeTakeFirst()
  );
}
