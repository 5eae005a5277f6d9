import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A user's clone has no `../shared/` (issue 42, item 12): what a user reads points at what the
 * repository has and the service serves (`/v2/reference`, `/v2/docs`, docs/). docs/architecture.md
 * is the maintainers' map and may name the design sources.
 */
const ROOT = join(import.meta.dir, "../..");
const MAINTAINERS_ONLY = new Set(["docs/architecture.md"]);

const userFacing = [
  "README.md",
  "sdk/README.md",
  "bench/README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
].filter((path) => !MAINTAINERS_ONLY.has(path));

test("README, docs/ and the SDK's README point at nothing in ../shared (a user's clone has none)", () => {
  const links = userFacing.flatMap((path) =>
    readFileSync(join(ROOT, path), "utf8")
      .split("\n")
      .flatMap((line, index) =>
        /\.\.\/shared\b/.test(line) ? [`${path}:${index + 1}: ${line.trim()}`] : [],
      ),
  );
  expect(links).toEqual([]);
});
