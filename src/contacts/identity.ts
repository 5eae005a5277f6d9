import { sql } from "kysely";
import type { ProviderIdentity, RecipientAddress } from "../channel/identity.ts";
import { CHANNEL } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import { ADVISORY_LOCKS } from "../db/locks.ts";
import { newId } from "../ids.ts";
import { type ContactRow, findContact } from "./repository.ts";

/**
 * Who a person is (DESIGN §14): the ONE home of the rule that maps what the provider says about a
 * user (a phone, a business-scoped user id or both) to a contact of a tenant. Inbound finalize,
 * status ingest, sends and the system messages `user_changed_number` / `user_changed_user_id` use it.
 *
 * For an identity (phone?, userId?) seen in a tenant:
 * 1. the contact that has (or had: contact_user_ids) that user id is the person; it takes the phone;
 * 2. else the contact with that phone takes the user id if it has none (one that has another user id
 *    is someone else who had the number: it loses the phone, and a new contact is made);
 * 3. else a new contact;
 * 4. when 1 and 2 name two contacts and the one found by phone has no user id, they are one person:
 *    the younger is merged into the older (messages, conversation, unread count, opt-out move; the
 *    younger keeps a row with `merged_into` and loses its phone and user id, which then find the
 *    survivor; a `contact.merged` event is written).
 *
 * Race-free: a resolution takes transaction-scoped advisory locks on the hashes of every key it
 * reads (tenant+phone, tenant+user id), sorted, before it reads; two webhooks for the same new person
 * take turns and the second finds what the first created. The send path's own contact upsert (by
 * phone, without these locks: it stays one statement) can still win a phone first: the insert here
 * is ON CONFLICT DO NOTHING, and a batch that lost such a race is resolved again.
 */

export type { ProviderIdentity, RecipientAddress };

/** One identity to resolve in a batch; `change` applies a provider's system message. */
export interface IdentityInput {
  tenantId: string;
  identity: ProviderIdentity;
  change?: { kind: "number"; newPhone: string } | { kind: "user_id"; newUserId: string };
}

/** A contact with a phone is addressed by phone; one without, by its user id (DESIGN §14). */
export function recipientOf(contact: { phone: string | null; user_id: string | null }): RecipientAddress {
  if (contact.phone) return { phone: contact.phone };
  if (contact.user_id) return { userId: contact.user_id };
  throw new Error("recipientOf: a contact without a phone or a user id");
}

/** The live contact `contactId` names (a merged one's id names its survivor); undefined if none. */
export async function findLiveContact(
  db: Db,
  tenantId: string,
  contactId: string,
): Promise<ContactRow | undefined> {
  const contact = await findContact(db, tenantId, contactId);
  // Merges keep chains flat (a survivor merged later takes its merged contacts along): one hop.
  return contact?.merged_into ? findContact(db, tenantId, contact.merged_into) : contact;
}

/** The live contact id `contactId` names; undefined if none. For the tests: code reads findLiveContact. */
export async function resolveContactRef(
  db: Db,
  tenantId: string,
  contactId: string,
): Promise<string | undefined> {
  return (await findLiveContact(db, tenantId, contactId))?.id;
}

/** The live contact that has, had, or shares as parent, this user id; undefined if none. */
export async function findContactByUserId(
  db: Db,
  tenantId: string,
  userIdOrParent: string,
): Promise<ContactRow | undefined> {
  return (
    db
      .selectFrom("contacts")
      .selectAll()
      .where("tenant_id", "=", tenantId)
      .where("merged_into", "is", null)
      .where((eb) =>
        eb.or([
          eb("user_id", "=", userIdOrParent),
          eb(
            "id",
            "=",
            eb
              .selectFrom("contact_user_ids")
              .select("contact_id")
              .where("tenant_id", "=", tenantId)
              .where("user_id", "=", userIdOrParent),
          ),
          eb("parent_user_id", "=", userIdOrParent),
        ]),
      )
      // A parent id may be shared: the current holder first, then the oldest.
      .orderBy(sql`user_id = ${userIdOrParent}`, "desc")
      .orderBy("created_at")
      .orderBy("id")
      .limit(1)
      .executeTakeFirst()
  );
}

/** Resolves one identity (its own transaction unless `db` is one): the contact id. */
export async function resolveIdentity(db: Db, input: IdentityInput): Promise<string> {
  const [id] = await resolveIdentities(db, [input]);
  return id!;
}

/**
 * A status's recipient that the message's contact does not carry yet (src/outbound/status.ts finds
 * them): the BSUID it names is not the contact's, or it shares a phone the contact has not.
 */
export interface StatusRecipientRow {
  tenant_id: string;
  /** The phone of the message's contact: the send went to it. */
  contact_phone: string | null;
  /** The BSUID of the message's contact: it names the contact when the status names none. */
  contact_user_id: string | null;
  /** The status's `recipient_id`, when the user shares it. */
  phone: string | null;
  user_id: string | null;
  parent_user_id: string | null;
}

/**
 * "Statuses that carry `recipient_user_id` attach it to the message's contact by the same rule"
 * (DESIGN §14): each recipient is resolved as the identity (the phone the send went to, else the one
 * the status shares; its BSUID, else the contact's): the contact found by phone gains the BSUID
 * (rule 2), one found by BSUID gains the phone (rule 1), or the contact that has the phone and the
 * one that has the BSUID are merged (rule 4). In the caller's transaction if `db` is one.
 */
export async function attachStatusRecipients(db: Db, rows: readonly StatusRecipientRow[]): Promise<void> {
  if (rows.length === 0) return;
  await resolveIdentities(
    db,
    rows.map((row) => ({
      tenantId: row.tenant_id,
      identity: {
        phone: row.contact_phone ?? row.phone,
        userId: row.user_id ?? row.contact_user_id,
        parentUserId: row.parent_user_id,
        username: null,
        name: null,
      },
    })),
  );
}

/** A contact as the resolution sees and changes it. */
interface Person {
  id: string;
  tenantId: string;
  phone: string | null;
  userId: string | null;
  parentUserId: string | null;
  username: string | null;
  name: string | null;
  createdAt: Date;
  isNew: boolean;
  changed: boolean;
  /** Set when merged into another in this batch. */
  mergedInto?: string;
  /** The phone and user id it had when read (a key it gives up is cleared before another takes it). */
  readPhone: string | null;
  readUserId: string | null;
}

interface Merge {
  tenantId: string;
  survivor: string;
  merged: string;
}

const keyOf = (tenantId: string, kind: "p" | "u", value: string) => `${tenantId} ${kind} ${value}`;

/** A batch lost a race for a phone to the send path's upsert: resolve it again. */
class LostRace extends Error {}

/**
 * Resolves a batch of identities in one transaction (the caller's, if `db` is one): the contact id
 * of each, in order. A few statements for the batch whatever its size: the locks, one read, and the
 * writes only when something was learned (merges, changed contacts, new contacts, user ids).
 */
export async function resolveIdentities(db: Db, inputs: readonly IdentityInput[]): Promise<string[]> {
  if (inputs.length === 0) return [];
  const run = async (trx: Db) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await resolveOnce(trx, inputs);
      } catch (error) {
        if (!(error instanceof LostRace) || attempt >= 5) throw error;
      }
    }
  };
  return db.isTransaction ? run(db) : db.transaction().execute(run);
}

async function resolveOnce(trx: Db, inputs: readonly IdentityInput[]): Promise<string[]> {
  const phones: [string, string][] = [];
  const userIds: [string, string][] = [];
  for (const { tenantId, identity, change } of inputs) {
    if (identity.phone) phones.push([tenantId, identity.phone]);
    if (identity.userId) userIds.push([tenantId, identity.userId]);
    if (change?.kind === "number") phones.push([tenantId, change.newPhone]);
    if (change?.kind === "user_id") userIds.push([tenantId, change.newUserId]);
  }
  const keys = [
    ...new Set([...phones.map(([t, p]) => keyOf(t, "p", p)), ...userIds.map(([t, u]) => keyOf(t, "u", u))]),
  ].sort();
  // In hash order, one statement: every resolution takes its locks in the same order.
  await sql`
    SELECT count(pg_advisory_xact_lock(${ADVISORY_LOCKS.contactIdentity}::int, h))
    FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(${keys}::text[]) AS k ORDER BY 1) AS s`.execute(trx);

  // Every live contact a key names, locked in id order (the order of every contact writer).
  const { rows } = await sql<ContactRow>`
    SELECT c.* FROM contacts c
    WHERE c.merged_into IS NULL AND c.id IN (
      SELECT id FROM contacts
      WHERE channel = ${CHANNEL} AND (tenant_id, phone) IN
        (SELECT * FROM unnest(${phones.map(([t]) => t)}::text[], ${phones.map(([, p]) => p)}::text[]))
      UNION ALL
      SELECT id FROM contacts
      WHERE (tenant_id, user_id) IN
        (SELECT * FROM unnest(${userIds.map(([t]) => t)}::text[], ${userIds.map(([, u]) => u)}::text[]))
      UNION ALL
      SELECT contact_id FROM contact_user_ids
      WHERE (tenant_id, user_id) IN
        (SELECT * FROM unnest(${userIds.map(([t]) => t)}::text[], ${userIds.map(([, u]) => u)}::text[])))
    ORDER BY c.id
    FOR UPDATE OF c`.execute(trx);
  const formerIds = await sql<{ tenant_id: string; user_id: string; contact_id: string }>`
    SELECT tenant_id, user_id, contact_id FROM contact_user_ids
    WHERE (tenant_id, user_id) IN
      (SELECT * FROM unnest(${userIds.map(([t]) => t)}::text[], ${userIds.map(([, u]) => u)}::text[]))`.execute(
    trx,
  );

  const people = new Map<string, Person>();
  const byPhone = new Map<string, Person>();
  const byUserId = new Map<string, Person>();
  for (const row of rows) {
    const person: Person = {
      id: row.id,
      tenantId: row.tenant_id,
      phone: row.phone,
      userId: row.user_id,
      parentUserId: row.parent_user_id,
      username: row.username,
      name: row.name,
      createdAt: new Date(row.created_at),
      isNew: false,
      changed: false,
      readPhone: row.phone,
      readUserId: row.user_id,
    };
    people.set(person.id, person);
    if (person.phone) byPhone.set(keyOf(person.tenantId, "p", person.phone), person);
    if (person.userId) byUserId.set(keyOf(person.tenantId, "u", person.userId), person);
  }
  for (const former of formerIds.rows) {
    const person = people.get(former.contact_id);
    const key = keyOf(former.tenant_id, "u", former.user_id);
    if (person && !byUserId.has(key)) byUserId.set(key, person);
  }
  /** User ids a contact has newly taken: contact_user_ids rows to write. */
  const learnedUserIds = new Map<string, { tenantId: string; userId: string; person: Person }>();
  const merges: Merge[] = [];
  const live = (person: Person | undefined): Person | undefined => {
    let p = person;
    while (p?.mergedInto) p = people.get(p.mergedInto);
    return p;
  };
  /** The id of the contact `id` is now (itself, or the survivor it was merged into). */
  const liveId = (id: string): string => live(people.get(id))?.id ?? id;

  const setPhone = (person: Person, phone: string) => {
    if (person.phone === phone) return;
    if (person.phone) byPhone.delete(keyOf(person.tenantId, "p", person.phone));
    person.phone = phone;
    person.changed = true;
    byPhone.set(keyOf(person.tenantId, "p", phone), person);
  };
  const dropPhone = (person: Person) => {
    if (!person.phone) return;
    byPhone.delete(keyOf(person.tenantId, "p", person.phone));
    person.phone = null;
    person.changed = true;
  };
  const setUserId = (person: Person, userId: string) => {
    const key = keyOf(person.tenantId, "u", userId);
    learnedUserIds.set(key, { tenantId: person.tenantId, userId, person });
    byUserId.set(key, person);
    if (person.userId === userId) return;
    person.userId = userId;
    person.changed = true;
  };
  const create = (tenantId: string): Person => {
    const person: Person = {
      id: newId("ctc"),
      tenantId,
      phone: null,
      userId: null,
      parentUserId: null,
      username: null,
      name: null,
      createdAt: new Date(),
      isNew: true,
      changed: true,
      readPhone: null,
      readUserId: null,
    };
    people.set(person.id, person);
    return person;
  };
  /** Rule 4: the younger into the older; the survivor. */
  const merge = (a: Person, b: Person): Person => {
    const aFirst =
      a.createdAt < b.createdAt || (a.createdAt.getTime() === b.createdAt.getTime() && a.id < b.id);
    const [survivor, younger] = aFirst ? [a, b] : [b, a];
    // One created in this batch was never written: nothing to move.
    if (!younger.isNew) {
      merges.push({ tenantId: survivor.tenantId, survivor: survivor.id, merged: younger.id });
    }
    younger.mergedInto = survivor.id;
    const phone = younger.phone;
    const userId = younger.userId;
    dropPhone(younger);
    if (userId) {
      byUserId.set(keyOf(younger.tenantId, "u", userId), survivor);
      younger.userId = null;
    }
    for (const [key, learned] of learnedUserIds)
      if (learned.person === younger) learnedUserIds.set(key, { ...learned, person: survivor });
    if (phone && !survivor.phone) setPhone(survivor, phone);
    if (userId && !survivor.userId) setUserId(survivor, userId);
    else if (userId)
      learnedUserIds.set(keyOf(survivor.tenantId, "u", userId), {
        tenantId: survivor.tenantId,
        userId,
        person: survivor,
      });
    survivor.parentUserId ??= younger.parentUserId;
    survivor.username ??= younger.username;
    survivor.name ??= younger.name;
    survivor.changed = true;
    return survivor;
  };

  const resolved: string[] = [];
  for (const { tenantId, identity, change } of inputs) {
    const { phone, userId } = identity;
    const byUser = userId ? live(byUserId.get(keyOf(tenantId, "u", userId))) : undefined;
    const byNumber = phone ? live(byPhone.get(keyOf(tenantId, "p", phone))) : undefined;
    let person: Person;
    if (byUser && byNumber && byUser !== byNumber) {
      if (byNumber.userId === null) {
        person = merge(byUser, byNumber);
      } else {
        // The number belongs to this user now; the contact that had it is someone else.
        dropPhone(byNumber);
        person = byUser;
      }
    } else if (byUser) {
      person = byUser;
    } else if (byNumber && (userId === null || byNumber.userId === null)) {
      person = byNumber;
    } else {
      if (byNumber) dropPhone(byNumber);
      person = create(tenantId);
    }
    if (phone) setPhone(person, phone);
    if (userId && person.userId !== userId) {
      // A user id the person had before stays theirs; the current one is only ever replaced by a
      // user_changed_user_id (below) or taken when it has none.
      if (person.userId === null) setUserId(person, userId);
    }
    if (identity.parentUserId && person.parentUserId !== identity.parentUserId) {
      person.parentUserId = identity.parentUserId;
      person.changed = true;
    }
    if (identity.username && person.username !== identity.username) {
      person.username = identity.username;
      person.changed = true;
    }
    if (identity.name && person.name === null) {
      person.name = identity.name;
      person.changed = true;
    }
    if (change?.kind === "number") {
      // The old number no longer finds the person (it may be someone else's tomorrow).
      const holder = live(byPhone.get(keyOf(tenantId, "p", change.newPhone)));
      if (holder && holder !== person) {
        if (holder.userId === null) person = merge(person, holder);
        else dropPhone(holder);
      }
      if (person.phone && person.phone !== change.newPhone) dropPhone(person);
      setPhone(person, change.newPhone);
    } else if (change?.kind === "user_id") {
      // The new id replaces the old one, which still finds the person (contact_user_ids).
      const holder = live(byUserId.get(keyOf(tenantId, "u", change.newUserId)));
      if (holder && holder !== person) person = merge(person, holder);
      if (person.userId) setUserId(person, person.userId);
      const current = person.userId;
      if (current !== change.newUserId) {
        if (current) learnedUserIds.set(keyOf(tenantId, "u", current), { tenantId, userId: current, person });
        person.userId = null;
        setUserId(person, change.newUserId);
      }
    }
    resolved.push(person.id);
  }

  await writeResolution(trx, [...people.values()], liveId, merges, [...learnedUserIds.values()]);
  return resolved.map(liveId);
}

async function writeResolution(
  trx: Db,
  people: Person[],
  liveId: (id: string) => string,
  merges: Merge[],
  learned: { tenantId: string; userId: string; person: Person }[],
): Promise<void> {
  if (merges.length > 0)
    await writeMerges(
      trx,
      merges.map((m) => ({ ...m, survivor: liveId(m.survivor) })),
    );

  const changed = people.filter((p) => p.changed && !p.isNew && !p.mergedInto);
  // Keys given up first: another contact of the batch may take them in the next statement.
  const giving = changed.filter(
    (p) =>
      (p.readPhone !== null && p.readPhone !== p.phone) ||
      (p.readUserId !== null && p.readUserId !== p.userId),
  );
  if (giving.length > 0) {
    await sql`
      UPDATE contacts c SET
        phone = CASE WHEN c.phone IS DISTINCT FROM v.phone THEN NULL ELSE c.phone END,
        user_id = CASE WHEN c.user_id IS DISTINCT FROM v.user_id THEN NULL ELSE c.user_id END
      FROM unnest(${giving.map((p) => p.id)}::text[], ${giving.map((p) => p.phone)}::text[],
                  ${giving.map((p) => p.userId)}::text[]) AS v(id, phone, user_id)
      WHERE c.id = v.id`.execute(trx);
  }
  if (changed.length > 0) {
    await sql`
      UPDATE contacts c SET phone = v.phone, user_id = v.user_id, parent_user_id = v.parent_user_id,
        username = v.username, name = v.name
      FROM unnest(${changed.map((p) => p.id)}::text[], ${changed.map((p) => p.phone)}::text[],
                  ${changed.map((p) => p.userId)}::text[], ${changed.map((p) => p.parentUserId)}::text[],
                  ${changed.map((p) => p.username)}::text[], ${changed.map((p) => p.name)}::text[])
        AS v(id, phone, user_id, parent_user_id, username, name)
      WHERE c.id = v.id`.execute(trx);
  }
  const created = people.filter((p) => p.isNew && !p.mergedInto);
  if (created.length > 0) {
    const { rows } = await sql<{ id: string }>`
      INSERT INTO contacts (id, tenant_id, phone, user_id, parent_user_id, username, name)
      SELECT * FROM unnest(${created.map((p) => p.id)}::text[], ${created.map((p) => p.tenantId)}::text[],
                  ${created.map((p) => p.phone)}::text[], ${created.map((p) => p.userId)}::text[],
                  ${created.map((p) => p.parentUserId)}::text[], ${created.map((p) => p.username)}::text[],
                  ${created.map((p) => p.name)}::text[])
      ORDER BY 1
      ON CONFLICT DO NOTHING
      RETURNING id`.execute(trx);
    if (rows.length < created.length) throw new LostRace("a contact's phone was taken meanwhile");
  }
  if (learned.length > 0) {
    await sql`
      INSERT INTO contact_user_ids (tenant_id, user_id, contact_id)
      SELECT * FROM unnest(${learned.map((l) => l.tenantId)}::text[], ${learned.map((l) => l.userId)}::text[],
                  ${learned.map((l) => liveId(l.person.id))}::text[])
      ORDER BY 1, 2
      ON CONFLICT (tenant_id, user_id) DO UPDATE SET contact_id = excluded.contact_id`.execute(trx);
  }
}

/**
 * The merges of a batch, in one statement: each merged contact gives up its keys and points at its
 * survivor (as do contacts merged into it before); its messages, conversation summary (the newest
 * message wins, unread counts add up), user ids and opt-out move to the survivor; a `contact.merged`
 * event per survivor goes to the event log.
 */
async function writeMerges(trx: Db, merges: Merge[]): Promise<void> {
  const tenants = merges.map((m) => m.tenantId);
  const survivors = merges.map((m) => m.survivor);
  const merged = merges.map((m) => m.merged);
  await sql`
    WITH v AS MATERIALIZED (
      SELECT * FROM unnest(${tenants}::text[], ${survivors}::text[], ${merged}::text[]) AS v(tenant_id, survivor, merged)
    ), gone AS (
      UPDATE contacts c SET phone = NULL, user_id = NULL, merged_into = v.survivor
      FROM v WHERE c.tenant_id = v.tenant_id AND (c.id = v.merged OR c.merged_into = v.merged)
      RETURNING c.id, c.tenant_id, v.survivor, v.merged
    ), survivor AS (
      UPDATE contacts c SET
        opted_out_at = COALESCE(c.opted_out_at, o.opted_out_at),
        last_inbound_at = GREATEST(c.last_inbound_at, o.last_inbound_at)
      FROM (SELECT v.survivor, min(m.opted_out_at) AS opted_out_at, max(m.last_inbound_at) AS last_inbound_at
            FROM v JOIN contacts m ON m.id = v.merged GROUP BY v.survivor) o
      WHERE c.id = o.survivor
    ), moved AS (
      UPDATE messages m SET contact_id = v.survivor
      FROM v WHERE m.tenant_id = v.tenant_id AND m.contact_id = v.merged
    ), user_ids AS (
      UPDATE contact_user_ids u SET contact_id = v.survivor
      FROM v WHERE u.contact_id = v.merged
    ), summaries AS (
      DELETE FROM conversations c USING v WHERE c.contact_id = v.merged
      RETURNING c.*, v.survivor
    ), summary AS (
      INSERT INTO conversations AS c
        (contact_id, tenant_id, last_message_seq, last_message_at, last_outbound_at, panel_read_at, unread)
      SELECT survivor, min(tenant_id),
        (array_agg(last_message_seq ORDER BY last_message_at DESC, last_message_seq DESC))[1],
        max(last_message_at), max(last_outbound_at), max(panel_read_at), sum(unread)
      FROM summaries GROUP BY survivor ORDER BY survivor
      ON CONFLICT (contact_id) DO UPDATE SET
        last_message_seq = CASE WHEN (excluded.last_message_at, excluded.last_message_seq)
          > (c.last_message_at, c.last_message_seq) THEN excluded.last_message_seq ELSE c.last_message_seq END,
        last_message_at = GREATEST(c.last_message_at, excluded.last_message_at),
        last_outbound_at = GREATEST(c.last_outbound_at, excluded.last_outbound_at),
        panel_read_at = GREATEST(c.panel_read_at, excluded.panel_read_at),
        unread = c.unread + excluded.unread
    )
    -- The event log (DESIGN §12, §14): one contact.merged per survivor, naming every id merged.
    INSERT INTO event_pending (tenant_id, shard, type, contact_id, data)
    SELECT tenant_id, feed_shard_of(tenant_id, (SELECT shards FROM feed_shards)), 'contact.merged', survivor,
      jsonb_build_object('merged', jsonb_agg(merged ORDER BY merged))
    FROM (SELECT DISTINCT tenant_id, survivor, merged FROM v) AS m
    GROUP BY tenant_id, survivor`.execute(trx);
}
