// Runs after `npm run build` (postbuild): builds the web console, the hook's bundle and its native client, makes the embedded store's
// empty template (initdb, once per PGlite version), and stamps the build so `npm start`
// (scripts/ensure-built.mjs) knows it is current.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Written when a build finished; sources newer than it make `npm start` build again. */
export const BUILD_STAMP = join(root, "node_modules", ".cache", "unimatrix", "build-stamp");

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  execFileSync(process.execPath, [join(root, "services", "gateway", "scripts", "build-web.mjs")], { stdio: "inherit" });
  execFileSync(process.execPath, [join(root, "apps", "machine", "scripts", "bundle-hook.mjs")], { stdio: "inherit" });
  execFileSync(process.execPath, [join(root, "apps", "machine", "scripts", "build-native-hook.mjs")], {
    stdio: "inherit",
  });
  // The built kit, through its public `/store` entry (the workspace link in node_modules).
  const { prepareEmbeddedTemplate } = await import("@unimatrix/service-kit/store");
  prepareEmbeddedTemplate();
  mkdirSync(dirname(BUILD_STAMP), { recursive: true });
  writeFileSync(BUILD_STAMP, `${new Date().toISOString()}\n`);
}
