import type { App } from "../../src/app.ts";
import { ManualClock } from "../../src/clock.ts";
import type { Db } from "../../src/db/connect.ts";
import { sequenceFeed, startFeedSequencer } from "../../src/feed/sequencer.ts";
import { newId } from "../../src/ids.ts";
import { finalizeInbound } from "../../src/inbound/finalize.ts";
import type { Logger } from "../../src/logger.ts";
import { storeMessages } from "../../src/messages/store.ts";

/**
 * DESIGN §6's lost-nothing check, shared by test/feed/feed.test.ts (seconds) and bench/feed.ts (large):
 * concurrent writers commit messages for several tenants, some slowly, some rolling back, while
 * sequencer loops number them and readers follow the feed's cursors over HTTP. Afterwards every
 * reader must have seen every committed message of its tenant, nothing else, and in first sight the
 * same order a full re-read from the start gives.
 */

export interface FeedTenant {
  tenantId: string;
  senderId: string;
  /** Not read by the check any more (its writers write for many customers); bench/feed.ts sets it. */
  contactId: string;
  /** A token of this tenant with messaging:read. */
  token: string;
}

export interface LostNothingOptions {
  app: App;
  /** Writers' and sequencers' connections (at least writers + sequencers + 2). */
  db: Db;
  logger: Logger;
  tenants: FeedTenant[];
  writers: number;
  messagesPerWriter: number;
  readersPerTenant: number;
  /** Share of writer transactions that roll back at the end. */
  rollbackRate: number;
  /** Upper bound of each random pause inside a writer transaction. */
  maxDelayMs: number;
  /** Sequencer loops running side by side (a shard's loops take turns through its lock). */
  sequencers: number;
  /** FEED_SHARDS for the loops (the count in Postgres is raised to it; default: as it is). */
  shards?: number;
}

export interface ReaderOutcome {
  tenantId: string;
  pages: number;
  seen: number;
  duplicates: number;
  missing: number;
  foreign: number;
  rolledBackSeen: number;
  orderMatchesReread: boolean;
}

export interface LostNothingReport {
  committed: number;
  rolledBack: number;
  /** Committed messages some reader never saw. */
  lost: number;
  readers: ReaderOutcome[];
  /** A full re-read gave exactly the committed messages of its tenant, each once. */
  rereadsExact: boolean;
  seconds: number;
}

class Rollback extends Error {}

interface FeedPageBody {
  data: { id: string }[];
  has_more: boolean;
  next_cursor: string;
}

async function readPage(
  app: App,
  token: string,
  since: string | undefined,
  limit: number,
): Promise<FeedPageBody> {
  const query = new URLSearchParams({ limit: String(limit), ...(since && { since }) });
  // Rate limited, or the database briefly out of reach on a crowded machine: both say "retry", for a while.
  for (let attempt = 0; ; attempt++) {
    const response = await app.handle(
      new Request(`http://localhost/v2/messages?${query}`, { headers: { authorization: `Bearer ${token}` } }),
    );
    if ((response.status === 429 || response.status === 503) && attempt < 200) {
      await Bun.sleep(50);
      continue;
    }
    if (response.status !== 200)
      throw new Error(`feed read failed: ${response.status} ${await response.text()}`);
    return (await response.json()) as FeedPageBody;
  }
}

/** Every message of a tenant's feed from the start, in feed order. */
export async function rereadFeed(app: App, token: string): Promise<string[]> {
  const ids: string[] = [];
  let since: string | undefined;
  for (;;) {
    const page = await readPage(app, token, since, 500);
    ids.push(...page.data.map((m) => m.id));
    since = page.next_cursor;
    if (!page.has_more) return ids;
  }
}

const pause = (maxMs: number) => Bun.sleep(Math.random() * maxMs);

/** One of 200 customers (a contact each, per tenant). */
const customerPhone = (customer: number) => `+4915100${String(customer % 200).padStart(6, "0")}`;

export async function runLostNothing(options: LostNothingOptions): Promise<LostNothingReport> {
  const started = performance.now();
  const { db, tenants } = options;
  const committed = new Map<string, Set<string>>(tenants.map((t) => [t.tenantId, new Set()]));
  const rolledBack = new Set<string>();
  const clock = new ManualClock();

  // One message, written by the message writer (src/messages/store.ts: the row and the feed
  // hand-off) in a transaction that stays open a while after, and sometimes rolls back. Many
  // customers, as in life: one shared contact would serialize the writers on its conversation row.
  async function writeSlowly(tenant: FeedTenant, body: string, customer: number): Promise<void> {
    const id = newId("msg");
    try {
      await db.transaction().execute(async (trx) => {
        const now = new Date();
        await storeMessages(trx, [
          {
            id,
            tenantId: tenant.tenantId,
            senderId: tenant.senderId,
            direction: "inbound",
            phone: customerPhone(customer),
            contactName: null,
            windowFrom: now,
            type: "text",
            preview: body,
            text: body,
            mediaType: null,
            mediaFilename: null,
            status: null,
            applicationId: null,
            content: null,
            providerMessageId: null,
            createdAt: now,
            visible: true,
          },
        ]);
        await pause(options.maxDelayMs);
        await pause(options.maxDelayMs);
        if (Math.random() < options.rollbackRate) throw new Rollback();
      });
      committed.get(tenant.tenantId)!.add(id);
    } catch (error) {
      if (!(error instanceof Rollback)) throw error;
      rolledBack.add(id);
    }
  }

  // The real finalize path, from a stored webhook event.
  async function finalizeStored(tenant: FeedTenant, body: string, customer: number): Promise<void> {
    const providerMessageId = `wamid.lost-nothing.${newId("evt")}`;
    await db
      .insertInto("inbound_events")
      .values({
        provider_message_id: providerMessageId,
        tenant_id: tenant.tenantId,
        sender_id: tenant.senderId,
        payload: JSON.stringify({
          message: {
            id: providerMessageId,
            from: customerPhone(customer).slice(1),
            type: "text",
            text: { body },
          },
          contact: null,
        }),
      })
      .execute();
    const outcome = await finalizeInbound(db, clock, providerMessageId);
    if (outcome) committed.get(tenant.tenantId)!.add(outcome.messageId);
  }

  async function writer(index: number): Promise<void> {
    for (let i = 0; i < options.messagesPerWriter; i++) {
      const tenant = tenants[(index + i) % tenants.length]!;
      const body = `writer ${index} message ${i}`;
      const customer = index * options.messagesPerWriter + i;
      if (i % 3 === 0) await finalizeStored(tenant, body, customer);
      else await writeSlowly(tenant, body, customer);
    }
  }

  const loops = Array.from({ length: options.sequencers }, () =>
    startFeedSequencer(db, options.logger, { intervalMs: 20, shards: options.shards }),
  );
  let writing = true;

  async function reader(
    tenant: FeedTenant,
  ): Promise<{ tenant: FeedTenant; order: string[]; pages: number; duplicates: number }> {
    const order: string[] = [];
    const seen = new Set<string>();
    let duplicates = 0;
    let pages = 0;
    let since: string | undefined;
    let caughtUpAfterWriters = false;
    while (!caughtUpAfterWriters) {
      const writersDone = !writing;
      const page = await readPage(options.app, tenant.token, since, 1 + Math.floor(Math.random() * 60));
      pages++;
      for (const { id } of page.data) {
        if (seen.has(id)) duplicates++;
        else {
          seen.add(id);
          order.push(id);
        }
      }
      since = page.next_cursor;
      // Done once a read that started after the writers and the sequencer finished found nothing more.
      if (writersDone && !page.has_more && page.data.length === 0) caughtUpAfterWriters = true;
      else if (!page.has_more) await pause(10);
    }
    return { tenant, order, pages, duplicates };
  }

  const readers = tenants.flatMap((tenant) =>
    Array.from({ length: options.readersPerTenant }, () => reader(tenant)),
  );
  await Promise.all(Array.from({ length: options.writers }, (_, i) => writer(i)));
  await Promise.all(loops.map((loop) => loop.stop()));
  // Number whatever the loops left, then let the readers see the end.
  while ((await sequenceFeed(db)).taken > 0);
  writing = false;
  const results = await Promise.all(readers);

  const rereads = new Map<string, string[]>();
  for (const tenant of tenants) rereads.set(tenant.tenantId, await rereadFeed(options.app, tenant.token));

  const allCommitted = new Map<string, string>();
  for (const [tenantId, ids] of committed) for (const id of ids) allCommitted.set(id, tenantId);
  const lostIds = new Set<string>();
  const outcomes = results.map(({ tenant, order, pages, duplicates }) => {
    const seen = new Set(order);
    const mine = committed.get(tenant.tenantId)!;
    const missing = [...mine].filter((id) => !seen.has(id));
    for (const id of missing) lostIds.add(id);
    const reread = rereads.get(tenant.tenantId)!;
    return {
      tenantId: tenant.tenantId,
      pages,
      seen: seen.size,
      duplicates,
      missing: missing.length,
      foreign: order.filter((id) => allCommitted.has(id) && allCommitted.get(id) !== tenant.tenantId).length,
      rolledBackSeen: order.filter((id) => rolledBack.has(id)).length,
      orderMatchesReread: order.length === reread.length && order.every((id, i) => reread[i] === id),
    };
  });
  const rereadsExact = tenants.every((tenant) => {
    const reread = rereads.get(tenant.tenantId)!;
    const mine = committed.get(tenant.tenantId)!;
    return (
      reread.length === mine.size &&
      new Set(reread).size === reread.length &&
      reread.every((id) => mine.has(id))
    );
  });
  return {
    committed: allCommitted.size,
    rolledBack: rolledBack.size,
    lost: lostIds.size,
    readers: outcomes,
    rereadsExact,
    seconds: Math.round((performance.now() - started) / 10) / 100,
  };
}
