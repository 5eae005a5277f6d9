/**
 * Bundles the SDK into one ES module for Node 20+ (which cannot run TypeScript itself):
 *
 *   bun sdk/scripts/build.ts [outdir]     default sdk/dist (not committed)
 *
 * The bundle is sdk/src as it is, with the types stripped: no Bun API is used, and a test runs it
 * under Node against the real service.
 */
import { fileURLToPath } from "node:url";

const ENTRY = fileURLToPath(new URL("../src/index.ts", import.meta.url));
const DEFAULT_OUTDIR = fileURLToPath(new URL("../dist", import.meta.url));

/** Writes `<outdir>/index.js`; its path. */
export async function buildForNode(outdir: string = DEFAULT_OUTDIR): Promise<string> {
  const result = await Bun.build({ entrypoints: [ENTRY], outdir, target: "node", format: "esm" });
  if (!result.success) throw new AggregateError(result.logs, "sdk build failed");
  return `${outdir}/index.js`;
}

if (import.meta.main) console.log(`wrote ${await buildForNode(process.argv[2])}`);
