import { execFile } from "node:child_process";
import { accessSync, constants, readdirSync } from "node:fs";
import { createServer } from "node:net";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);

/** A free TCP port on 127.0.0.1 (the OS picks it; a race with another process is possible, not likely). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.listen(0, "127.0.0.1", resolve).once("error", reject));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The newest Postgres major version installed (Debian's postgresql-common layout), or undefined. */
function installedVersion(): string | undefined {
  try {
    return readdirSync("/usr/lib/postgresql")
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a))[0];
  } catch {
    return undefined;
  }
}

/**
 * Why this machine cannot make a cluster of its own (no Postgres server packages, no
 * postgresql-common, no write access to its directories: root or the `postgres` user can), or
 * undefined when it can. Checked before a suite starts, so that it is skipped rather than failed.
 */
export function clusterUnavailable(): string | undefined {
  const version = installedVersion();
  if (!version) return "no Postgres server under /usr/lib/postgresql";
  for (const dir of [`/etc/postgresql/${version}`, `/var/lib/postgresql/${version}`, "/usr/bin/pg_createcluster"]) {
    try {
      accessSync(dir, dir.startsWith("/usr/bin") ? constants.X_OK : constants.W_OK);
    } catch {
      return `${dir} is missing or not ${dir.startsWith("/usr/bin") ? "executable" : "writable"} (pg_createcluster needs root or the postgres user)`;
    }
  }
  return undefined;
}

/**
 * A Postgres cluster of a test's own (`pg_createcluster` on a free port, trust auth), so that it can
 * be stopped, restarted and made read-only without touching the shared server on 5432.
 * `create()` answers why not when the machine cannot make one (no postgresql-common, no permission).
 */
export class PgCluster {
  private constructor(
    readonly version: string,
    readonly name: string,
    readonly port: number,
  ) {}

  /** Creates and starts a cluster (`clusterUnavailable()` says beforehand whether it can). */
  static async create(label: string): Promise<PgCluster> {
    const version = installedVersion();
    if (!version) throw new Error("no Postgres server under /usr/lib/postgresql");
    const name = `umx_${label}_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
    const port = await freePort();
    await run("pg_createcluster", [version, name, "-p", String(port), "--", "--auth=trust"]);
    const cluster = new PgCluster(version, name, port);
    try {
      await cluster.start();
    } catch (error) {
      await cluster.drop();
      throw error;
    }
    return cluster;
  }

  /** `postgres://postgres@127.0.0.1:<port>/<database>`. */
  url(database = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async #ctl(...args: string[]): Promise<void> {
    await run("pg_ctlcluster", ["--skip-systemctl-redirect", this.version, this.name, ...args]);
  }

  /** Starts the server (returns once it accepts connections). */
  async start(): Promise<void> {
    await this.#ctl("start");
  }

  /** Stops like a crash or a managed restart: `-m immediate` (no checkpoint, every backend dropped). */
  async stopImmediately(): Promise<void> {
    await this.#ctl("stop", "-m", "immediate");
  }

  /** Runs SQL as the superuser on a fresh connection. */
  async sql<Row = Record<string, unknown>>(text: string, database = "postgres"): Promise<Row[]> {
    const client = new pg.Client({ connectionString: this.url(database) });
    client.on("error", () => {});
    await client.connect();
    try {
      return (await client.query(text)).rows as Row[];
    } finally {
      await client.end().catch(() => {});
    }
  }

  /** Terminates every client backend on `database` but this one: what an idle-connection reaper or a failover does. */
  async terminateBackends(database: string): Promise<number> {
    const rows = await this.sql<{ n: string }>(
      `SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
        WHERE datname = '${database}' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** Makes every new transaction read-only (on) or not (off), as a failover's read-only moment does. */
  async setReadOnly(on: boolean): Promise<void> {
    await this.sql(
      on ? "ALTER SYSTEM SET default_transaction_read_only = on" : "ALTER SYSTEM RESET default_transaction_read_only",
    );
    await this.sql("SELECT pg_reload_conf()");
  }

  /** Stops and removes the cluster and its data. */
  async drop(): Promise<void> {
    await run("pg_dropcluster", ["--stop", this.version, this.name]).catch(() => {});
  }
}
