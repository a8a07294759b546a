// Runs before `npm start` (and start:<service>, migrate, bootstrap): builds only when the build is
// stale — `npm install` builds the tree, so a fresh clone starts without compiling again. Stale =
// some source, generated or config file is newer than the stamp the last `npm run build` left
// (scripts/build-done.mjs). Then the npm script runs the same command the container runs.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { BUILD_STAMP, root } from "./build-done.mjs";

const workspaces = ["proto", "packages/service-kit", "services/cube", "services/device", "services/presence"]
  .concat(["services/gateway", "apps/unimatrix"])
  .map((w) => join(root, w));
const inputs = ["src", "gen", "generated", "web", "prisma", "package.json", "tsconfig.json"];

/** The newest modification time under `path` (a file or a directory tree), 0 when it is absent. */
function newest(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(path)) {
    if (entry === "node_modules" || entry === "dist") continue;
    latest = Math.max(latest, newest(join(path, entry)));
  }
  return latest;
}

function stale() {
  if (!existsSync(BUILD_STAMP)) return true;
  const built = statSync(BUILD_STAMP).mtimeMs;
  const candidates = [join(root, "tsconfig.base.json"), join(root, "package.json")];
  for (const w of workspaces) for (const input of inputs) candidates.push(join(w, input));
  return candidates.some((path) => newest(path) > built);
}

if (stale()) {
  process.stderr.write("building (sources changed since the last build)…\n");
  execFileSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: "inherit" });
}
