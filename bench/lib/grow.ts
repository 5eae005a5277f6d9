/**
 * `--grown N`: the database of a service that has been running a while. N million messages of other
 * tenants, spread over the last 30 days in creation order, with what the service writes beside them:
 * contacts and conversations (one contact per ten messages), feed entries and feed heads, an
 * idempotency record per outbound message of the last day (older ones are swept), and the status
 * events' outcome (delivered or read, a provider id each). Set-based SQL in chunks, one statement per
 * table and chunk, so 10 million take minutes, not hours.
 */
import { sql } from "kysely";
import type { Db } from "../../src/db/connect.ts";

/** Filler tenants: the load spread as on a shared service, none of them the bench's tenant. */
const TENANTS = 20;
const CHUNK = 500_000;
const SPAN_DAYS = 30;

export async function growDatabase(db: Db, millions: number, say: (m: string) => void): Promise<void> {
  const total = Math.round(millions * 1_000_000);
  if (total <= 0) return;
  const started = performance.now();
  const contacts = Math.max(TENANTS, Math.floor(total / 10));
  await sql`SET synchronous_commit = off`.execute(db);
  await sql`
    INSERT INTO tenants (id, name, daily_quota, created_at)
    SELECT 'ten_grown' || lpad(t::text, 13, '0'), 'Grown tenant ' || t, NULL, now() - interval '60 days'
    FROM generate_series(1, ${sql.lit(TENANTS)}) t`.execute(db);
  // Contact c belongs to tenant c % TENANTS; message i to contact i % contacts (so to its tenant).
  await sql`
    INSERT INTO contacts (id, tenant_id, phone, name, last_inbound_at, created_at)
    SELECT 'ctc_grown' || lpad(c::text, 13, '0'), 'ten_grown' || lpad((c % ${sql.lit(TENANTS)} + 1)::text, 13, '0'),
           '+49' || (1500000000 + c)::text, 'Grown contact ' || c,
           CASE WHEN c % 3 = 0 THEN now() - interval '2 days' END, now() - interval '40 days'
    FROM generate_series(0, ${sql.lit(contacts - 1)}) c`.execute(db);

  for (let from = 0; from < total; from += CHUNK) {
    const to = Math.min(total, from + CHUNK) - 1;
    // Message i: created (total - i) steps before now across the span; every fifth inbound.
    await sql`
      INSERT INTO messages (id, tenant_id, contact_id, sender_id, direction, type, preview, text, status,
                            application_id, content, provider_message_id, send_attempts, created_at,
                            updated_at, send_started_at)
      SELECT 'msg_grown' || lpad(i::text, 13, '0'),
             'ten_grown' || lpad((i % ${sql.lit(contacts)} % ${sql.lit(TENANTS)} + 1)::text, 13, '0'),
             'ctc_grown' || lpad((i % ${sql.lit(contacts)})::text, 13, '0'),
             'snd_grown' || lpad((i % ${sql.lit(contacts)} % ${sql.lit(TENANTS)} + 1)::text, 13, '0'),
             CASE WHEN i % 5 = 0 THEN 'inbound' ELSE 'outbound' END,
             CASE WHEN i % 5 = 0 THEN 'text' ELSE 'template' END,
             'Your order ' || i || ' has shipped',
             CASE WHEN i % 5 = 0 THEN 'Thanks! ' || i END,
             CASE WHEN i % 5 = 0 THEN NULL WHEN i % 3 = 0 THEN 'read' ELSE 'delivered' END,
             CASE WHEN i % 5 <> 0 THEN 'app_grown' END,
             CASE WHEN i % 5 <> 0 THEN '{"kind":"template","template":"tpl_grown","template_name":"order_shipped","language":"en"}'::jsonb END,
             'wamid.grown' || i,
             CASE WHEN i % 5 = 0 THEN 0 ELSE 1 END,
             now() - (${sql.lit(total)} - i) * (interval '1 day' * ${sql.lit(SPAN_DAYS)} / ${sql.lit(total)}),
             now() - (${sql.lit(total)} - i) * (interval '1 day' * ${sql.lit(SPAN_DAYS)} / ${sql.lit(total)}),
             CASE WHEN i % 5 <> 0 THEN now() - (${sql.lit(total)} - i) * (interval '1 day' * ${sql.lit(SPAN_DAYS)} / ${sql.lit(total)}) END
      FROM generate_series(${sql.lit(from)}, ${sql.lit(to)}) i`.execute(db);
    // A feed position unique within the tenant (gaps do not matter: nobody reads these feeds).
    await sql`
      INSERT INTO feed_entries (tenant_id, seq, message_id)
      SELECT 'ten_grown' || lpad((i % ${sql.lit(contacts)} % ${sql.lit(TENANTS)} + 1)::text, 13, '0'), i + 1,
             'msg_grown' || lpad(i::text, 13, '0')
      FROM generate_series(${sql.lit(from)}, ${sql.lit(to)}) i`.execute(db);
    // Idempotency records live 24 h: only the last day's outbound messages still have one.
    await sql`
      INSERT INTO idempotency_keys (application_id, key, tenant_id, request_hash, message_id, created_at)
      SELECT 'app_grown', 'key-' || i, 'ten_grown' || lpad((i % ${sql.lit(contacts)} % ${sql.lit(TENANTS)} + 1)::text, 13, '0'),
             decode(md5(i::text), 'hex'), 'msg_grown' || lpad(i::text, 13, '0'),
             now() - (${sql.lit(total)} - i) * (interval '1 day' * ${sql.lit(SPAN_DAYS)} / ${sql.lit(total)})
      FROM generate_series(greatest(${sql.lit(from)}, ${sql.lit(total)} - ${sql.lit(Math.ceil(total / SPAN_DAYS))}), ${sql.lit(to)}) i
      WHERE i % 5 <> 0`.execute(db);
    say(`grown: ${to + 1} of ${total} messages (${((performance.now() - started) / 1000).toFixed(0)} s)`);
  }

  await sql`
    INSERT INTO feed_heads (tenant_id, last_seq)
    SELECT tenant_id, max(seq) FROM feed_entries WHERE tenant_id LIKE 'ten_grown%' GROUP BY tenant_id
    ON CONFLICT (tenant_id) DO UPDATE SET last_seq = excluded.last_seq`.execute(db);
  await sql`
    INSERT INTO conversations (contact_id, tenant_id, last_message_seq, last_message_at, last_outbound_at)
    SELECT contact_id, min(tenant_id), max(seq), max(created_at),
           max(created_at) FILTER (WHERE direction = 'outbound')
    FROM messages WHERE tenant_id LIKE 'ten_grown%' GROUP BY contact_id`.execute(db);
  // The planner sees the grown tables as they are, and the visibility map is set (index-only scans).
  await sql`VACUUM (ANALYZE) messages, feed_entries, idempotency_keys, contacts, conversations`.execute(db);
  // Gigabytes just written are dirty in shared buffers and the WAL is far past max_wal_size: without
  // this the measured window held the checkpoint that writes them out (full-page images, p99 of
  // accept 157-198 ms against 28-33 ms on an empty database), which a service that has run a while
  // does not pay.
  await sql`CHECKPOINT`.execute(db);
  say(
    `grown: ${total} messages, ${contacts} contacts in ${((performance.now() - started) / 1000).toFixed(0)} s`,
  );
}
