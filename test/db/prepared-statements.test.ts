import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CompiledQuery, sql } from "kysely";
import { createDb, type Db } from "../../src/db/connect.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";

let env: TestEnv;
let db: Db;

beforeAll(async () => {
  env = await createTestEnv();
  // One connection, so every query below runs in the session whose statements we list.
  db = createDb(env.config.databaseUrl, { max: 1 });
});
afterAll(async () => {
  await db.destroy();
  await env.close();
});

const preparedCount = async (text: string) =>
  (
    await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = ${text}`.execute(db)
  ).rows[0]!.n;

describe("hot statements are prepared (src/db/connect.ts)", () => {
  test("a text with parameters is named and parsed once per connection from its third use", async () => {
    const text = "SELECT $1::int + 1 AS answer /* prepared-statements.test */";
    for (let i = 1; i <= 2; i++) {
      const { rows } = await db.executeQuery<{ answer: number }>(CompiledQuery.raw(text, [i]));
      expect(rows[0]!.answer).toBe(i + 1);
    }
    expect(await preparedCount(text)).toBe(0);
    for (let i = 3; i <= 5; i++) {
      const { rows } = await db.executeQuery<{ answer: number }>(CompiledQuery.raw(text, [i]));
      // The answer is this execution's, not the first one's.
      expect(rows[0]!.answer).toBe(i + 1);
    }
    expect(await preparedCount(text)).toBe(1);
  });

  test("a text without parameters (BEGIN, COMMIT, DDL) stays unnamed", async () => {
    const text = "SELECT 42 AS answer /* prepared-statements.test, no parameters */";
    for (let i = 0; i < 5; i++) await db.executeQuery(CompiledQuery.raw(text, []));
    expect(await preparedCount(text)).toBe(0);
  });

  test("a prepared statement still fails and recovers like any other (a transaction rolled back)", async () => {
    const text = "SELECT 1 / $1::int AS answer /* prepared-statements.test, division */";
    for (let i = 1; i <= 3; i++) await db.executeQuery(CompiledQuery.raw(text, [1]));
    await expect(
      db.transaction().execute(async (trx) => trx.executeQuery(CompiledQuery.raw(text, [0]))),
    ).rejects.toThrow(/division by zero/);
    const { rows } = await db.executeQuery<{ answer: number }>(CompiledQuery.raw(text, [1]));
    expect(rows[0]!.answer).toBe(1);
  });

  test("a migration that changes what a prepared SELECT * returns fails one query, then the text runs unnamed", async () => {
    await sql`CREATE TABLE prepared_probe (id int PRIMARY KEY, a text)`.execute(db);
    await sql`INSERT INTO prepared_probe VALUES (1, 'one')`.execute(db);
    const text = "SELECT * FROM prepared_probe WHERE id = $1";
    for (let i = 0; i < 3; i++) await db.executeQuery(CompiledQuery.raw(text, [1]));
    expect(await preparedCount(text)).toBe(1);
    await sql`ALTER TABLE prepared_probe ADD COLUMN b text DEFAULT 'two'`.execute(db);
    await expect(db.executeQuery(CompiledQuery.raw(text, [1]))).rejects.toThrow(
      /cached plan must not change result type/,
    );
    const { rows } = await db.executeQuery(CompiledQuery.raw(text, [1]));
    expect(rows).toEqual([{ id: 1, a: "one", b: "two" }]);
  });
});
