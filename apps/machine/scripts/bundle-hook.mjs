// Bundles `unimatrix hook …` into one file (apps/machine/dist/hook-bundle.js): the hook runs after every
// tool call as a fresh process, and one pre-resolved file starts faster than a tree of modules.
// Its input is the compiled CLI (dist/cli.js, from `tsc --build`); the daemon (loaded only by
// `machine run`) stays a separate file.

import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");

await build({
  entryPoints: [join(dist, "cli.js")],
  outfile: join(dist, "hook-bundle.js"),
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  minify: true,
  // Loaded with import() only where needed; they resolve beside the bundle in dist/.
  external: ["./daemon.js"],
  logLevel: "warning",
});
