// `npm run bench [-- service ...]`: builds the tree, then runs each service's benchmark
// (services/<name>/bench/index.ts) in turn with tsx. Benchmarks print their own tables, each
// figure next to its floor (a bare grpc-js handler + one raw pg statement, raw Redis) measured in
// the same run, and `BENCH <name> <value> <unit>` lines. This script passes the output through
// and ends with every BENCH line of the run in one block, with the load average, so two runs
// diff line by line. `BENCH_SECONDS` shortens every timed phase (the short mode: BENCH_SECONDS=1).
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
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
// `embedded` is the whole system on the embedded default (apps/unimatrix/bench): what `npm start` costs;
// `machine` is the hook's round trip at the machine daemon's door (apps/machine/bench).
const known = [...all, "embedded", "machine"];
// `soak` holds steady load on the fleet for SOAK_MINUTES (default 30; test/soak): only when asked.
const onRequest = ["soak"];
for (const name of asked)
  if (![...known, ...onRequest].includes(name))
    throw new Error(`unknown benchmark ${name}; one of ${[...known, ...onRequest].join(", ")}`);
const services = asked.length > 0 ? asked : known;
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");

/** Runs one benchmark, echoing its output; resolves with its BENCH lines and exit code. */
function run(entry) {
  return new Promise((resolve) => {
    const child = spawn(join(bin, "tsx"), [entry], { cwd: root, stdio: ["ignore", "pipe", "inherit"], env });
    const lines = [];
    let rest = "";
    child.stdout.on("data", (chunk) => {
      process.stdout.write(chunk);
      const text = rest + chunk.toString();
      const parts = text.split("\n");
      rest = parts.pop() ?? "";
      for (const line of parts) if (line.startsWith("BENCH ")) lines.push(line);
    });
    child.on("exit", (code) => resolve({ lines, code: code ?? 1 }));
  });
}

// The build `npm start` uses (tsc, console, embedded store template, stamp).
execFileSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: "inherit", env });
const collected = [];
let failed = false;
for (const service of services) {
  const entry =
    service === "embedded"
      ? join(root, "apps", "unimatrix", "bench", "index.ts")
      : service === "machine"
        ? join(root, "apps", "machine", "bench", "index.ts")
        : service === "soak"
          ? join(root, "test", "soak", "index.ts")
          : join(root, "services", service, "bench", "index.ts");
  if (!existsSync(entry)) {
    process.stdout.write(`${service}: no benchmark yet\n`);
    continue;
  }
  process.stdout.write(`\n== ${service} == (load ${load()})\n`);
  const { lines, code } = await run(entry);
  collected.push(...lines);
  if (code !== 0) {
    failed = true;
    process.stdout.write(`${service}: benchmark exited with ${code}\n`);
  }
}
process.stdout.write(`\n== BENCH (load ${load()}, BENCH_SECONDS=${process.env.BENCH_SECONDS ?? "default"}) ==\n`);
for (const line of collected) process.stdout.write(`${line}\n`);
process.exit(failed ? 1 : 0);
