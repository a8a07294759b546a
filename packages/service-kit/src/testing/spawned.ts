import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";

/** A whole system started the way `npm start` starts it, in a child process. */
export interface SpawnedSystem {
  readonly child: ChildProcessWithoutNullStreams;
  /** The port each service printed in the start banner (`  <name> <scheme>://127.0.0.1:<port>`). */
  readonly ports: Readonly<Record<string, number>>;
  /** The metrics port each service printed beside it (`metrics http://127.0.0.1:<port>/metrics`). */
  readonly metricsPorts: Readonly<Record<string, number>>;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
}

/**
 * Runs `entry` (a composition's `main.js`) with this Node and resolves once its start banner named
 * a port for each of `services`; rejects with its output if it exits first. Every service and its
 * metrics listener gets an ephemeral port (`<NAME>_PORT=0`, `<NAME>_METRICS_PORT=0`: suites and
 * benchmarks run beside other systems), logs are at warn, and `env` comes last. `echo` copies its
 * stderr to this process's (benchmarks show a failing system as it fails).
 */
export async function spawnSystem(options: {
  readonly entry: string;
  readonly args?: readonly string[];
  readonly cwd: string;
  readonly services: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly echo?: boolean;
}): Promise<SpawnedSystem> {
  const ephemeral: Record<string, string> = {};
  for (const name of options.services) {
    ephemeral[`${name.toUpperCase()}_PORT`] = "0";
    ephemeral[`${name.toUpperCase()}_METRICS_PORT`] = "0";
  }
  const child = spawn(process.execPath, [options.entry, ...(options.args ?? [])], {
    cwd: options.cwd,
    env: { ...process.env, ...ephemeral, LOG_LEVEL: "warn", ...options.env },
  });
  let output = "";
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    if (options.echo) process.stderr.write(chunk);
  });
  const banner = new RegExp(`^ {2}(${options.services.join("|")})\\s+\\w+:\\/\\/127\\.0\\.0\\.1:(\\d+)\\b`, "gm");
  const metricsBanner = new RegExp(
    `^ {2}(${options.services.join("|")})\\s+\\S+\\s+metrics http:\\/\\/127\\.0\\.0\\.1:(\\d+)\\/metrics`,
    "gm",
  );
  const ports = await new Promise<Record<string, number>>((resolve, reject) => {
    const found: Record<string, number> = {};
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      for (const match of output.matchAll(banner)) found[match[1] as string] = Number(match[2]);
      if (options.services.every((name) => found[name] !== undefined)) resolve(found);
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code} before it was up:\n${output}`)));
  });
  const metricsPorts: Record<string, number> = {};
  for (const match of output.matchAll(metricsBanner)) metricsPorts[match[1] as string] = Number(match[2]);
  return { child, ports, metricsPorts, output: () => output };
}
