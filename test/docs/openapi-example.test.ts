import { afterAll, beforeAll, expect, test } from "bun:test";
import { createShop, postMessage } from "../support/fixtures.ts";
import { call, createTestEnv, type TestEnv } from "../support/index.ts";

/**
 * Issue 24: what /v2/reference offers for POST /messages works as it stands. The reference shows the
 * first example of the request body; sent unchanged (Try it out) by an application whose only sender
 * is the sandbox's, with the sandbox's templates synced, it is accepted. So is the button example.
 */

// biome-ignore lint/suspicious/noExplicitAny: the document is arbitrary JSON
type Json = any;

let env: TestEnv;
let token: string;
let examples: [string, { summary: string; value: Json }][];

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 1000, token: 1000 } });
  ({ token } = await createShop(env, "Acme", { templates: true }));
  const served = await call(env.app, "GET", "/v2/openapi.json");
  expect(served.status).toBe(200);
  examples = Object.entries(
    served.body.paths["/messages"].post.requestBody.content["application/json"].examples,
  ) as typeof examples;
});
afterAll(() => env.close());

test("the reference's default example for POST /messages answers 201 against the sandbox", async () => {
  const [name, example] = examples[0] ?? [];
  expect(name).toBe("template");
  const answer = await postMessage(env.app, token, example?.value);
  expect(answer.status, answer.text).toBe(201);
  expect(answer.body).toMatchObject({
    object: "message",
    status: "accepted",
    content: { kind: "template", template_name: "order_shipped", language: "en" },
  });
});

test("so does the example with a URL button (the sandbox's appointment_reminder)", async () => {
  const example = examples.find(([name]) => name === "buttons")?.[1];
  expect(example).toBeDefined();
  const answer = await postMessage(env.app, token, example?.value);
  expect(answer.status, answer.text).toBe(201);
});
