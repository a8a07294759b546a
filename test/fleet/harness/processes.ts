import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { join } from "node:path";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { createClient } from "@unimatrix/service-kit/grpc";

/** The repository root (this file is test/fleet/harness/processes.ts). */
const REPO_ROOT = join(__dirname, "..", "..", "..");
/** The compiled launcher of a tree (`npm run build` makes it). */
const launcherOf = (root: string) => join(root, "apps", "unimatrix", "dist", "main.js");

/** The services a fleet process can run. */
export type ServiceKind = "cube" | "device" | "presence" | "gateway";

/** The port variable of each service. */
const PORT_VARIABLE: Record<ServiceKind, string> = {
  cube: "CUBE_PORT",
  device: "DEVICE_PORT",
  presence: "PRESENCE_PORT",
  gateway: "GATEWAY_PORT",
};

/** When a process was SIGKILLed: the signal was sent at `signalledAt`, the exit seen at `exitedAt` (epoch ms). */
export interface KillRecord {
  readonly name: string;
  readonly signalledAt: number;
  readonly exitedAt: number;
}

/** A graceful stop: SIGTERM at `signalledAt`, gone at `exitedAt`, and each change of its health answer. */
export interface DrainRecord extends KillRecord {
  readonly health: readonly { readonly at: number; readonly status: string }[];
}

/** Resolves when `predicate` holds, polling every `everyMs`; rejects after `timeoutMs` naming `what`. */
export async function poll(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 30_000,
  everyMs = 50,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/**
 * One real OS process: `node apps/unimatrix/dist/main.js <service>` with its own environment,
 * its output in `<runDir>/<name>.log`. Started on port 0 the first time; a restart keeps the port
 * (so the other processes' address lists stay right).
 */
export class FleetProcess {
  #child: ChildProcess | undefined;
  #exited: Promise<number | null> = Promise.resolve(null);
  #port = 0;
  #metricsPort: number | undefined;
  /** Number of times this process was started. */
  starts = 0;

  constructor(
    /** Unique name in the fleet, e.g. `cube-1`. */
    readonly name: string,
    readonly service: ServiceKind,
    private readonly env: Record<string, string>,
    private readonly runDir: string,
    /** The built tree it runs (this checkout unless told: the upgrade test runs a previous release's). */
    public root = REPO_ROOT,
  ) {}

  /** The port it listens on (0 before the first start). */
  get port(): number {
    return this.#port;
  }

  /** The port of its Prometheus `/metrics` listener (a new one at each start). */
  get metricsPort(): number | undefined {
    return this.#metricsPort;
  }

  /** The OS process id while it runs. */
  get pid(): number | undefined {
    return this.running ? this.#child?.pid : undefined;
  }

  /** `127.0.0.1:<port>`. */
  get address(): string {
    return `127.0.0.1:${this.#port}`;
  }

  /** Whether the process is running. */
  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  get logPath(): string {
    return join(this.runDir, `${this.name}.log`);
  }

  /** Spawns the process and resolves once it printed where it listens (not yet ready: see `waitReady`). */
  async start(extraEnv: Record<string, string> = {}): Promise<void> {
    if (this.running) throw new Error(`${this.name} is already running`);
    const log = createWriteStream(this.logPath, { flags: "a" });
    log.write(`\n=== start #${this.starts + 1} at ${new Date().toISOString()} from ${this.root}\n`);
    const child = spawn(process.execPath, [launcherOf(this.root), this.service], {
      cwd: this.root,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/tmp",
        ...this.env,
        ...extraEnv,
        [PORT_VARIABLE[this.service]]: String(this.#port),
        // Several processes of a kind share this host: each takes any free metrics port.
        [PORT_VARIABLE[this.service].replace("_PORT", "_METRICS_PORT")]: "0",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#child = child;
    this.starts += 1;
    this.#exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
    child.stderr!.pipe(log, { end: false });
    const port = await new Promise<number>((resolve, reject) => {
      let seen = "";
      const onData = (chunk: Buffer) => {
        log.write(chunk);
        seen += chunk.toString("utf8");
        // The whole banner line: `  <service> <scheme>://host:<port>   metrics http://host:<port>/metrics`.
        const match = /^\s+\w+\s+(?:grpc|http):\/\/[^:\s]+:(\d+)\b(.*)\n/m.exec(seen);
        if (match) {
          this.#metricsPort = Number(/metrics http:\/\/[^:\s]+:(\d+)\//.exec(match[2]!)?.[1]) || undefined;
          resolve(Number(match[1]));
        }
      };
      child.stdout!.on("data", onData);
      child.once("exit", (code, signal) =>
        reject(new Error(`${this.name} exited (${code ?? signal}) before listening:\n${this.tail()}`)),
      );
    });
    this.#port = port;
  }

  /** Polls the process's health until it serves: gRPC `Health/Check` SERVING, or the gateway's `/readyz` 200. */
  async waitReady(timeoutMs = 30_000): Promise<void> {
    if (this.service === "gateway") {
      await poll(
        async () => {
          const answer = await fetch(`http://${this.address}/readyz`).catch(() => undefined);
          await answer?.body?.cancel();
          return answer?.status === 200;
        },
        `${this.name} /readyz`,
        timeoutMs,
      );
      return;
    }
    const health = createClient(Health, this.address);
    try {
      await poll(
        async () => {
          if (!this.running) throw new Error(`${this.name} exited while starting:\n${this.tail()}`);
          const answer = await health.check({ service: "" }, { deadline: 1_000 }).catch(() => undefined);
          return answer?.status === HealthCheckResponse_ServingStatus.SERVING;
        },
        `${this.name} Health/Check SERVING`,
        timeoutMs,
      );
    } finally {
      health.close();
    }
  }

  /** SIGKILL: no drain, no goodbye. Resolves once the process is gone. */
  async kill(): Promise<KillRecord> {
    const child = this.#child;
    if (!child || !this.running) throw new Error(`${this.name} is not running`);
    const signalledAt = Date.now();
    child.kill("SIGKILL");
    await this.#exited;
    return { name: this.name, signalledAt, exitedAt: Date.now() };
  }

  /**
   * SIGTERM while polling `Health/Check` every 50 ms: what a load balancer sees while the process
   * drains (the answers, with their time), until it is gone.
   */
  async terminate(graceMs = 30_000): Promise<DrainRecord> {
    const child = this.#child;
    if (!child || !this.running) throw new Error(`${this.name} is not running`);
    const health = createClient(Health, this.address);
    const seen: { at: number; status: string }[] = [];
    const signalledAt = Date.now();
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    let gone = false;
    const exited = this.#exited.then(() => {
      gone = true;
    });
    while (!gone) {
      const status = await health
        .check({ service: "" }, { deadline: 500 })
        .then((answer) => HealthCheckResponse_ServingStatus[answer.status] ?? String(answer.status))
        .catch((error: { code?: number }) => `error ${error.code}`);
      if (seen.at(-1)?.status !== status) seen.push({ at: Date.now(), status });
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 50))]);
    }
    clearTimeout(timer);
    health.close();
    return { name: this.name, signalledAt, exitedAt: Date.now(), health: seen };
  }

  /** SIGTERM and wait (SIGKILL after `graceMs`). */
  async stop(graceMs = 10_000): Promise<void> {
    const child = this.#child;
    if (!child || !this.running) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await this.#exited;
    clearTimeout(timer);
  }

  /** The last lines of the process's log (for failure messages). */
  tail(lines = 30): string {
    try {
      return readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }
}
