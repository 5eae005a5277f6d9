import { expect, test } from "bun:test";
import { join } from "node:path";
import { servedOpenApiDocument } from "../support/index.ts";

/**
 * The served OpenAPI document passes Spectral's `spectral:oas` rules (.spectral.yaml) without a single
 * error or warning. Spectral runs offline; `bunx redocly lint` gives the same verdict but for the
 * localhost server URL of a development configuration.
 */
const ROOT = join(import.meta.dir, "..", "..");
const SPECTRAL = join(ROOT, "node_modules/@stoplight/spectral-cli/dist/index.js");

const openApiDocument = servedOpenApiDocument();

async function spectral(file: string): Promise<{ code: string; message: string; path: string[] }[]> {
  const run = Bun.spawn(
    [process.execPath, SPECTRAL, "lint", "-q", "-f", "json", "-r", join(ROOT, ".spectral.yaml"), file],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [out, err] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text()]);
  await run.exited;
  try {
    return JSON.parse(out);
  } catch {
    throw new Error(`spectral printed no JSON (exit ${run.exitCode}): ${out}${err}`);
  }
}

test("Spectral (spectral:oas) finds nothing in the served document", async () => {
  expect(await spectral(openApiDocument().file)).toEqual([]);
});

test("and it does find what it should: a scheme the document does not define, no contact", async () => {
  const spoiled = JSON.parse(await Bun.file(openApiDocument().file).text());
  delete spoiled.info.contact;
  spoiled.paths["/senders"].get.security = [{ bearerAuth: [] }];
  const file = join(openApiDocument().dir, "spoiled.json");
  await Bun.write(file, JSON.stringify(spoiled));
  const found = (await spectral(file)).map((result) => result.code).sort();
  expect(found).toEqual(["info-contact", "oas3-operation-security-defined"]);
});
