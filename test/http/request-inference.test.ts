import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createTestEnv, type TestEnv } from "../support/index.ts";

/**
 * Elysia prepares for each request what the app's hooks and handlers read, inferred from their
 * source (its "sucrose"): a hook that hands its whole context to a function makes every request
 * of every route parse its cookies, copy its headers into an object and more. Ours name what they
 * read (src/pipeline/request-pipeline.ts); the API reads cookies and headers from the Request.
 */
let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(() => env.close());

describe("what every request prepares", () => {
  test("no hook or handler makes every request parse cookies or copy headers", () => {
    // Elysia's own record of the inference (not a public API: if it moves, this test says so).
    const inference = (env.app as unknown as { inference: Record<string, boolean> }).inference;
    expect(inference).toBeDefined();
    expect({ cookie: inference.cookie, headers: inference.headers }).toEqual({
      cookie: false,
      headers: false,
    });
  });
});
