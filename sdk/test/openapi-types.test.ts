import { expect, test } from "bun:test";
import { join } from "node:path";
import { servedOpenApiDocument } from "../../test/support/index.ts";
import { loadOpenApiTypescript } from "../scripts/generate.ts";

/**
 * A client generated from the served document with openapi-typescript (loaded as the SDK's own
 * generator loads it, sdk/scripts/generate.ts; integrators generate theirs the same way) refuses a
 * send request with both or neither of `template`/`body`, or both of `to`/`contact`, at compile
 * time: the probe's `@ts-expect-error` lines must each be an error, or tsc fails.
 */
const ROOT = join(import.meta.dir, "..", "..");

const openApiDocument = servedOpenApiDocument();

/** Types for the document, as openapi-typescript generates them. */
async function generateTypes(file: string): Promise<string> {
  const { default: openapiTS, astToString } = await loadOpenApiTypescript();
  return astToString(await openapiTS(JSON.parse(await Bun.file(file).text())));
}

const PROBE = `import type { components } from "./openapi.ts";
type Send = components["schemas"]["SendMessageRequest"];
const template = { name: "order_shipped", variables: { body: ["Ana", "A-1"] } };
export const byPhone: Send = { to: "+4915123456789", template };
export const byContact: Send = { contact: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY", body: "Hi", sender: "snd_1" };
// @ts-expect-error template and body
export const both: Send = { to: "+4915123456789", template, body: "Hi" };
// @ts-expect-error neither template nor body
export const neither: Send = { to: "+4915123456789" };
// @ts-expect-error to and contact
export const twoRecipients: Send = { to: "+4915123456789", contact: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY", body: "Hi" };
// @ts-expect-error no recipient
export const nobody: Send = { body: "Hi" };
`;

async function typecheck(dir: string): Promise<{ code: number; output: string }> {
  const run = Bun.spawn(
    [
      join(ROOT, "node_modules/.bin/tsc"),
      "--noEmit",
      "--strict",
      "--skipLibCheck",
      "--target",
      "es2022",
      "--module",
      "nodenext",
      "--allowImportingTsExtensions",
      "probe.ts",
    ],
    // Not in the repository: its tsconfig.json is not this probe's.
    { cwd: dir, stdout: "pipe", stderr: "pipe" },
  );
  const [out, err] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text()]);
  return { code: await run.exited, output: out + err };
}

test("openapi-typescript types refuse {to, template, body} and the other wrong pairs", async () => {
  await Bun.write(join(openApiDocument().dir, "openapi.ts"), await generateTypes(openApiDocument().file));
  await Bun.write(join(openApiDocument().dir, "probe.ts"), PROBE);
  expect(await typecheck(openApiDocument().dir)).toEqual({ code: 0, output: "" });
  // The probe can fail: without the expectations, the same lines are errors.
  await Bun.write(join(openApiDocument().dir, "probe.ts"), PROBE.replaceAll("// @ts-expect-error", "//"));
  const loose = await typecheck(openApiDocument().dir);
  expect(loose.code).not.toBe(0);
  expect(loose.output.match(/error TS/g)).toHaveLength(4);
});
