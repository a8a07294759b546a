// Builds the web console (web/) into dist/console/: one bundled, minified ES module and one
// stylesheet, both named by content hash under assets/, and index.html pointing at them. It lives
// inside dist/ so that whatever ships the gateway's dist/ (the runtime image) ships the console.
// Usage: node scripts/build-web.mjs  (from any directory)
import { createHash } from "node:crypto";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const web = join(root, "web");
const out = join(root, "dist", "console");
const hash = (text) => createHash("sha256").update(text).digest("hex").slice(0, 12);

const bundle = await build({
  entryPoints: [join(web, "src", "main.ts")],
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  sourcemap: false,
  write: false,
  legalComments: "none",
});
const js = bundle.outputFiles[0].text;
// The base stylesheet, then the admin pages' (one file served, in this order).
const css = (await Promise.all(["styles.css", "admin.css"].map((name) => readFile(join(web, name), "utf8")))).join(
  "\n",
);
const jsName = `app-${hash(js)}.js`;
const cssName = `styles-${hash(css)}.css`;
const html = (await readFile(join(web, "index.html"), "utf8")).replace("%JS%", jsName).replace("%CSS%", cssName);

await rm(out, { recursive: true, force: true });
await mkdir(join(out, "assets"), { recursive: true });
await Promise.all([
  writeFile(join(out, "assets", jsName), js),
  writeFile(join(out, "assets", cssName), css),
  writeFile(join(out, "index.html"), html),
]);
console.log(`web console built: dist/console/index.html, assets/${jsName} (${js.length} B), assets/${cssName}`);
