// `npm run bench [service ...]`: builds the tree, then runs each service's benchmark
// (services/<name>/bench/index.ts) in turn with tsx. Benchmarks print their own tables,
// each figure next to a raw baseline (pg, Redis, bare gRPC) measured in the same run.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "node_modules", ".bin");
const env = { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` };
// THE list of services (apps/unimatrix/services.json), in its order.
const all = JSON.parse(readFileSync(join(root, "apps", "unimatrix", "services.json"), "utf8")).services.map(
  (s) => s.name,
);
const asked = process.argv.slice(2);
// `embedded` is the whole system on the embedded default (apps/unimatrix/bench): what `npm start` costs.
const services = asked.length > 0 ? asked : [...all, "embedded"];

// The build `npm start` uses (tsc, console, embedded store template, stamp).
execFileSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: "inherit", env });
for (const service of services) {
  const entry =
    service === "embedded"
      ? join(root, "apps", "unimatrix", "bench", "index.ts")
      : join(root, "services", service, "bench", "index.ts");
  if (!existsSync(entry)) {
    process.stdout.write(`${service}: no benchmark yet\n`);
    continue;
  }
  process.stdout.write(`\n== ${service} ==\n`);
  execFileSync(join(bin, "tsx"), [entry], { cwd: root, stdio: "inherit", env });
}
