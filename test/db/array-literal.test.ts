import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { arrayLiteral, withArrayLiterals } from "../../src/db/array-literal.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(() => env.close());

/** What Postgres reads from the literal, as text elements. */
async function readBack(values: readonly (string | null)[]): Promise<(string | null)[]> {
  const { rows } = await sql<{ v: (string | null)[] }>`SELECT ${arrayLiteral(values)}::text[] AS v`.execute(
    env.deps.db,
  );
  return rows[0]!.v;
}

describe("a batch column as one array literal (src/db/array-literal.ts)", () => {
  test("strings an array literal treats specially come back as they went", async () => {
    const values = [
      "plain",
      "",
      'a "quoted" word',
      "back\\slash",
      "ends with \\",
      "{braces}, commas",
      "NULL",
      " padded ",
      "ünïcödé 👋",
      null,
    ];
    expect(await readBack(values)).toEqual(values);
  });

  test("control characters, which JSON escapes its own way, come back as they went", async () => {
    const values = ["line\nbreak", "tab\there", "bell\u0007", "\\n is two characters", null];
    expect(await readBack(values)).toEqual(values);
  });

  test("a lone surrogate becomes U+FFFD, as the driver's own arrays made it", async () => {
    expect(await readBack(["a\ud800b"])).toEqual(["a\uFFFDb"]);
  });

  test("numbers, booleans, instants and NULLs in typed arrays", async () => {
    const at = new Date("2026-11-26T10:00:00.123Z");
    const { rows } = await sql<{
      n: (number | null)[];
      b: (boolean | null)[];
      t: (Date | null)[];
      j: unknown[];
    }>`
      SELECT ${arrayLiteral([1, 2.5, null])}::float8[] AS n,
             ${arrayLiteral([true, false, undefined])}::bool[] AS b,
             ${arrayLiteral([at.toISOString(), null])}::timestamptz[] AS t,
             ${arrayLiteral([JSON.stringify({ a: 'x"y\\z\n' }), null])}::jsonb[] AS j`.execute(env.deps.db);
    expect(rows[0]).toEqual({
      n: [1, 2.5, null],
      b: [true, false, null],
      t: [at, null],
      j: [{ a: 'x"y\\z\n' }, null],
    });
  });

  test("the driver never escapes an array itself: not for a one-off query, nor for a prepared (repeated) one", async () => {
    // pg's Query reads utils.prepareValue at each call: watch what it is handed.
    const utils = require("pg/lib/utils.js") as { prepareValue: (value: unknown) => unknown };
    const original = utils.prepareValue;
    let arraysSeen = 0;
    utils.prepareValue = (value: unknown) => {
      if (Array.isArray(value)) arraysSeen++;
      return original(value);
    };
    try {
      const values = ['a "q"', "x", null];
      // Repeated, the text is prepared from the third run on (src/db/connect.ts).
      for (let run = 0; run < 5; run++) {
        const { rows } = await sql<{
          v: (string | null)[];
        }>`SELECT ${values}::text[] AS v, ${run}::int AS run`.execute(env.deps.db);
        expect(rows[0]!.v).toEqual(values);
      }
    } finally {
      utils.prepareValue = original;
    }
    expect(arraysSeen).toBe(0);
  });

  test("a plain array parameter goes as its literal on every connection; other values as they were", async () => {
    const values = ['a "q"', "back\\slash", "line\nbreak", null];
    const { rows } = await sql<{ v: (string | null)[] }>`SELECT ${values}::text[] AS v`.execute(env.deps.db);
    expect(rows[0]!.v).toEqual(values);
    const at = new Date("2026-11-26T10:00:00Z");
    const params = [values, [at], [Number.NaN], "x", [[1]]];
    expect(withArrayLiterals(params)).toEqual([arrayLiteral(values), [at], [Number.NaN], "x", [[1]]]);
  });
});
