// `npm run lint`'s import-circle gate: madge over every hand-written `src/` (generated code and
// build output excluded). Any circle fails.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import madge from "madge";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dirs = [
  "packages/service-kit/src",
  "services/cube/src",
  "services/device/src",
  "services/presence/src",
  "services/gateway/src",
  "services/gateway/web/src",
  "apps/machine/src",
  "apps/unimatrix/src",
].filter((dir) => existsSync(join(root, dir)));

const result = await madge(dirs, {
  baseDir: root,
  fileExtensions: ["ts"],
  excludeRegExp: [/(^|\/)(generated|gen|dist|node_modules)\//],
  detectiveOptions: { ts: { skipTypeImports: false } },
});
const circles = result.circular().map((circle) => circle.join(" > "));
for (const circle of circles) console.error(`import circle: ${circle}`);
if (circles.length > 0) process.exit(1);
console.log(`import circles: none (${dirs.length} src/ folders)`);
