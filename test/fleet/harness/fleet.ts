import { appendFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TEST_DATABASE_URL, TEST_INTERNAL_KEY, uniqueName } from "@unimatrix/service-kit/testing";
import pg from "pg";
import { Ledger } from "./ledger";
import { type DrainRecord, FleetProcess, type KillRecord, type ServiceKind } from "./processes";
import { RedisProxy } from "./redis-proxy";
import { migrate } from "./release";

/** The operator token every fleet process accepts (seeding only). */
export const FLEET_OPERATOR_TOKEN = "umx_operator_fleettest_0123456789abcdef";

/** How the gateways (and presence) reach the services. */
export type Targets =
  /** Every gateway dials every replica: `ipv4:127.0.0.1:<p1>,127.0.0.1:<p2>` (round robin). */
  | "balanced"
  /** Gateway i dials replica i only (`127.0.0.1:<p>`): the fleet today's `host:port` settings allow. */
  | "pinned";

/** What to start. */
export interface FleetOptions {
  readonly label: string;
  readonly targets: Targets;
  /** Extra variables per service kind. */
  readonly env?: Partial<Record<ServiceKind, Record<string, string>>>;
  /** The Redis behind the proxy (a private server's port); the shared one on 6379 unless told. */
  readonly redisPort?: number;
  /**
   * The built tree every process runs at first (this checkout unless told), whose migration command
   * runs on the fresh database before any process starts (as the chart's migration Job does).
   */
  readonly root?: string;
}

/** A fresh Postgres database for one run (services keep fixed schema names, so a run gets its own database). */
export async function createDatabase(name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops a run's database (its sessions are ended first). */
export async function dropDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/**
 * The fleet: two cube replicas, two presence replicas, one device, two gateways — each a real
 * process on the compiled tree — on a database of their own and Redis behind a cuttable proxy.
 */
export class Fleet {
  readonly ledger = new Ledger();
  readonly cube: FleetProcess[] = [];
  readonly presence: FleetProcess[] = [];
  readonly gateways: FleetProcess[] = [];
  device!: FleetProcess;
  /** Process output lives here (kept after the run for post-mortems). */
  readonly runDir: string;
  readonly startedAt = Date.now();

  private constructor(
    readonly options: FleetOptions,
    readonly proxy: RedisProxy,
    readonly databaseName: string,
    readonly databaseUrl: string,
    readonly busPrefix: string,
  ) {
    this.runDir = join(tmpdir(), `unimatrix-${databaseName}`);
    mkdirSync(this.runDir, { recursive: true });
  }

  /** Starts every process and waits until each reports ready. */
  static async start(options: FleetOptions): Promise<Fleet> {
    const name = uniqueName(`fleet_${options.label}`);
    const proxy = new RedisProxy("127.0.0.1", options.redisPort ?? 6379);
    await proxy.listen();
    const url = await createDatabase(name);
    const fleet = new Fleet(options, proxy, name, url, name.replaceAll("_", "-"));
    try {
      if (options.root) fleet.note(`migrated by ${options.root}: ${await migrate(options.root, url)}`);
      await fleet.#startAll();
    } catch (error) {
      await fleet.stop();
      throw error;
    }
    return fleet;
  }

  #common(): Record<string, string> {
    return {
      DATABASE_URL: this.databaseUrl,
      REDIS_URL: this.proxy.url,
      UMX_BUS_PREFIX: this.busPrefix,
      UMX_INTERNAL_KEY: TEST_INTERNAL_KEY,
      UMX_OPERATOR_TOKEN: FLEET_OPERATOR_TOKEN,
      UMX_BIND_HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      UMX_SHUTDOWN_GRACE_MS: "2000",
    };
  }

  #make(name: string, service: ServiceKind, env: Record<string, string> = {}): FleetProcess {
    const environment = { ...this.#common(), ...this.options.env?.[service], ...env };
    return new FleetProcess(name, service, environment, this.runDir, this.options.root);
  }

  /** `ipv4:127.0.0.1:<p1>,127.0.0.1:<p2>` for a set of replicas. */
  static target(replicas: readonly FleetProcess[]): string {
    return `ipv4:${replicas.map((r) => r.address).join(",")}`;
  }

  /** The target the i-th client (gateway or presence replica) dials for `replicas`. */
  #targetFor(replicas: readonly FleetProcess[], i: number): string {
    return this.options.targets === "balanced" ? Fleet.target(replicas) : replicas[i % replicas.length]!.address;
  }

  async #startAll(): Promise<void> {
    this.cube.push(this.#make("cube-1", "cube"), this.#make("cube-2", "cube"));
    this.device = this.#make("device-1", "device");
    const first = [...this.cube, this.device];
    await Promise.all(first.map((p) => p.start()));
    await Promise.all(first.map((p) => p.waitReady()));
    for (const i of [0, 1]) {
      this.presence.push(
        this.#make(`presence-${i + 1}`, "presence", {
          PRESENCE_CUBE_ADDRESS: this.#targetFor(this.cube, i),
        }),
      );
    }
    await Promise.all(this.presence.map((p) => p.start()));
    await Promise.all(this.presence.map((p) => p.waitReady()));
    for (const i of [0, 1]) {
      this.gateways.push(
        this.#make(`gateway-${String.fromCharCode(65 + i)}`, "gateway", {
          CUBE_ADDRESS: this.#targetFor(this.cube, i),
          DEVICE_ADDRESS: this.device.address,
          PRESENCE_ADDRESS: this.#targetFor(this.presence, i),
          GATEWAY_RATE_LIMIT_PER_SECOND: "0",
        }),
      );
    }
    await Promise.all(this.gateways.map((p) => p.start()));
    await Promise.all(this.gateways.map((p) => p.waitReady()));
  }

  /** Every process, by name. */
  get processes(): FleetProcess[] {
    return [...this.cube, this.device, ...this.presence, ...this.gateways].filter(Boolean);
  }

  /** The gateways' base URLs (killed ones included: a client finds out by being refused). */
  gatewayUrls(): string[] {
    return this.gateways.map((g) => `http://${g.address}`);
  }

  /** Writes a line to the run's timeline (`<runDir>/timeline.log`, and stderr as it happens). */
  note(text: string): void {
    const line = `${this.since()} ${text}\n`;
    appendFileSync(join(this.runDir, "timeline.log"), line);
    process.stderr.write(`[fleet] ${line}`);
  }

  /** SIGKILLs a process and writes the kill into the ledger. */
  async kill(target: FleetProcess): Promise<KillRecord> {
    const record = await target.kill();
    this.ledger.kills.push(record);
    this.note(`SIGKILL ${target.name} (gone after ${record.exitedAt - record.signalledAt} ms)`);
    return record;
  }

  /** Every graceful stop (SIGTERM): not an excuse for any failed request. */
  readonly drains: DrainRecord[] = [];

  /** Stops a process gracefully (SIGTERM), watching its health while it drains. */
  async drain(target: FleetProcess): Promise<DrainRecord> {
    this.note(`SIGTERM ${target.name}`);
    const record = await target.terminate();
    this.drains.push(record);
    const seen = record.health.map((h) => `${h.status} at +${h.at - record.signalledAt} ms`).join(", ");
    this.note(`${target.name} drained and gone after ${record.exitedAt - record.signalledAt} ms; health: ${seen}`);
    return record;
  }

  /** Starts a stopped process again on its port and waits until it is ready. */
  async restart(target: FleetProcess, timeoutMs = 30_000): Promise<void> {
    this.note(`starting ${target.name} again on port ${target.port}`);
    await target.start();
    await target.waitReady(timeoutMs);
    this.note(`${target.name} ready`);
  }

  /**
   * Stops every process (SIGTERM) and starts each again on its port against another database and
   * bus prefix (a restored copy, an empty Redis namespace), in the usual order; waits until ready.
   */
  async moveTo(databaseUrl: string, busPrefix: string): Promise<void> {
    await Promise.all(this.gateways.map((p) => p.stop(5_000)));
    await Promise.all([...this.presence, ...this.cube, this.device].map((p) => p.stop(5_000)));
    const env = { DATABASE_URL: databaseUrl, UMX_BUS_PREFIX: busPrefix };
    for (const group of [[...this.cube, this.device], this.presence, this.gateways]) {
      await Promise.all(group.map((p) => p.start(env)));
      await Promise.all(group.map((p) => p.waitReady()));
    }
    this.note(`every process started again on ${new URL(databaseUrl).pathname.slice(1)}, bus prefix ${busPrefix}`);
  }

  /**
   * A rolling replacement of one replica: SIGTERM (it drains, excusing nothing), then the same
   * replica (name, port, settings) started from `root` — what a new pod behind the same Service is
   * to the fleet's fixed address lists.
   */
  async replace(target: FleetProcess, root: string): Promise<DrainRecord> {
    const record = await this.drain(target);
    target.root = root;
    await this.restart(target);
    return record;
  }

  /** Seconds since the fleet started (for readable logs). */
  since(at = Date.now()): string {
    return `+${((at - this.startedAt) / 1000).toFixed(1)}s`;
  }

  /** Stops every process (SIGTERM), the proxy, and drops the database. */
  async stop(): Promise<void> {
    await Promise.all([...this.gateways].map((p) => p.stop(5_000)));
    await Promise.all([...this.presence, ...this.cube, this.device].filter(Boolean).map((p) => p.stop(5_000)));
    await this.proxy.close();
    await dropDatabase(this.databaseName).catch(() => {});
  }
}
