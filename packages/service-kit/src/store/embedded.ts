import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { PGlite, Transaction } from "@electric-sql/pglite";
import { ConfigError } from "../config";
import type { SqlSession } from "./sql";

/** The directory (under `UMX_DATA_DIR`) of the one embedded store every service of a process shares. */
export const EMBEDDED_STORE_DIR = "pglite";

/**
 * Postgres settings of the embedded store, over PGlite's own start parameters (which already run
 * with `fsync=off`: a write reaches the kernel at commit, so a crashed process loses nothing; only
 * a crash of the machine itself can, which is the embedded default's accepted trade).
 * `shared_buffers` 16MB instead of 128MB is the one that matters for memory (measured with all
 * four services: 418 → 264–297 MB resident when idle); a single-user backend needs few connection slots.
 */
const START_PARAMS = [
  "--single",
  "-F",
  "-O",
  "-j",
  "-c",
  "search_path=public",
  "-c",
  "exit_on_error=false",
  "-c",
  "log_checkpoints=false",
  "-c",
  "max_worker_processes=0",
  "-c",
  "max_parallel_workers=0",
  "-c",
  "max_parallel_workers_per_gather=0",
  "-c",
  "shared_buffers=16MB",
  "-c",
  "max_connections=4",
];

/**
 * Stores an older version left under `dataDir` (one PGlite per service, `<dataDir>/<service>/pgdata`):
 * they are no longer read; the start banner names them so their owner can start afresh.
 */
export function formerEmbeddedStores(dataDir: string): string[] {
  if (!existsSync(dataDir)) return [];
  return readdirSync(dataDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(dataDir, entry.name, "pgdata", "PG_VERSION")))
    .map((entry) => join(dataDir, entry.name));
}

/** A first-in-first-out lock (a promise chain): PGlite is one connection, and `search_path` is its state. */
class Lock {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => {});
    return result;
  }
}

/** One open PGlite, shared by reference count; `current` is the schema its `search_path` names. */
interface Shared {
  readonly db: PGlite;
  readonly lock: Lock;
  readonly lockFile: string;
  current: string | undefined;
  refs: number;
}

const stores = new Map<string, Promise<Shared>>();
/** Stores being closed: a new open of the same directory waits for the close to finish. */
const closing = new Map<string, Promise<void>>();

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** True when a process with this id is alive. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Claims the store for this process with a pid file: PGlite cannot share a directory between
 * processes, so a second process on the same `UMX_DATA_DIR` gets a clear refusal, not a broken store.
 */
function claim(dataDir: string): string {
  const file = join(dataDir, `${EMBEDDED_STORE_DIR}.pid`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx" });
      return file;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = Number(readFileSync(file, "utf8").trim());
      if (holder === process.pid) return file;
      if (Number.isInteger(holder) && holder > 0 && alive(holder)) {
        throw new ConfigError(
          "UMX_DATA_DIR",
          `(${dataDir}) is in use by process ${holder}: the embedded store serves one process. Run all ` +
            "services in one process (npm start), give each process its own UMX_DATA_DIR (and one " +
            "UMX_INTERNAL_KEY), or run separate processes against Postgres (DATABASE_URL)",
        );
      }
      rmSync(file, { force: true }); // left by a process that died
    }
  }
  throw new Error(`could not claim ${file}`);
}

/** Runs initdb for a new store at `dir` in a short-lived child process (see `prepareEmbeddedTemplate`). */
function initdb(dir: string): void {
  const script = `import("@electric-sql/pglite").then(async ({ PGlite }) => {
    const db = await PGlite.create(process.argv[1], { startParams: JSON.parse(process.argv[2]) });
    await db.close();
  })`;
  execFileSync(process.execPath, ["-e", script, dir, JSON.stringify(START_PARAMS)], {
    cwd: __dirname,
    stdio: ["ignore", "ignore", "inherit"],
  });
}

/** Where the empty store made at install time lives: keyed by PGlite's version and the start parameters. */
function templatePath(): string {
  const pgliteDir = dirname(dirname(require.resolve("@electric-sql/pglite")));
  const { version } = JSON.parse(readFileSync(join(pgliteDir, "package.json"), "utf8")) as { version: string };
  const params = createHash("sha256").update(JSON.stringify(START_PARAMS)).digest("hex").slice(0, 8);
  return join(__dirname, "..", "..", ".cache", `pglite-${version}-${params}`);
}

/**
 * Makes the empty embedded store once (`npm install` runs this): initdb runs in a child process,
 * because its WebAssembly instance would otherwise stay resident in the server (measured: ~500 MB
 * after a first start), and it costs seconds; a first start then copies the result. Returns its path.
 */
export function prepareEmbeddedTemplate(): string {
  const template = templatePath();
  if (existsSync(join(template, "PG_VERSION"))) return template;
  const building = `${template}.${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(dirname(building), { recursive: true });
  initdb(building);
  try {
    renameSync(building, template);
  } catch (error) {
    rmSync(building, { recursive: true, force: true });
    if (!existsSync(join(template, "PG_VERSION"))) throw error; // else another process made it first
  }
  // Templates of other PGlite versions or start parameters are never used again.
  for (const entry of readdirSync(dirname(template))) {
    if (/^pglite-[^-]+-[0-9a-f]{8}$/.test(entry) && join(dirname(template), entry) !== template) {
      rmSync(join(dirname(template), entry), { recursive: true, force: true });
    }
  }
  return template;
}

/** Creates a new store at `dir`: a copy of the template (made now if missing), or initdb where it cannot be kept. */
function initialise(dir: string): void {
  let template: string | undefined;
  try {
    template = prepareEmbeddedTemplate();
  } catch {
    // The kit's folder is read-only (an installed image): make the store in place instead.
  }
  if (template) cpSync(template, dir, { recursive: true });
  else initdb(dir);
}

async function openShared(dataDir: string): Promise<Shared> {
  mkdirSync(dataDir, { recursive: true });
  const lockFile = claim(dataDir);
  try {
    const dir = join(dataDir, EMBEDDED_STORE_DIR);
    if (!existsSync(join(dir, "PG_VERSION"))) initialise(dir);
    // PGlite loads its wasm through a dynamic import: load the ESM build the way it expects.
    const { PGlite } = await import("@electric-sql/pglite");
    const db = (await PGlite.create(dir, { startParams: START_PARAMS })) as unknown as PGlite;
    return { db, lock: new Lock(), lockFile, current: undefined, refs: 0 };
  } catch (error) {
    rmSync(lockFile, { force: true });
    throw error;
  }
}

/** A handle on the process's embedded store, scoped to one schema. */
export interface EmbeddedStore {
  /** What the PGlite Prisma adapter is given: every statement runs with `search_path` = the schema. */
  readonly client: PGlite;
  /** A raw SQL session on the schema (migrations, tests). */
  session(): SqlSession;
  /** Drops this handle; the store closes with the last one. */
  close(): Promise<void>;
}

/**
 * Opens (or joins) the one PGlite store of `dataDir` in this process and scopes a handle to
 * `schema`: each call takes the store's lock and, when another schema ran last, first sets
 * `search_path` to this one, so unqualified names resolve in this schema only, as on Postgres.
 */
export async function openEmbeddedStore(dataDir: string, schema: string): Promise<EmbeddedStore> {
  let opening = stores.get(dataDir);
  if (!opening) {
    const previous = closing.get(dataDir) ?? Promise.resolve();
    opening = previous.then(() => openShared(dataDir));
    stores.set(dataDir, opening);
    opening.catch(() => stores.delete(dataDir));
  }
  const shared = await opening;
  shared.refs++;
  const { db, lock } = shared;
  const enter = async () => {
    if (shared.current === schema) return;
    shared.current = undefined;
    await db.exec(`SET search_path TO ${quoteIdent(schema)}`);
    shared.current = schema;
  };
  /** Runs `fn` holding the lock with this schema on the path; a script may change the path, so forget it after. */
  const scoped = <T>(fn: () => Promise<T>, forget = false) =>
    lock.run(async () => {
      await enter();
      try {
        return await fn();
      } finally {
        if (forget) shared.current = undefined;
      }
    });
  const client: PGlite = new Proxy(db, {
    get(target, property) {
      if (property === "query")
        return (text: string, params?: unknown[], options?: object) =>
          scoped(() => target.query(text, params, options));
      if (property === "exec")
        return (text: string, options?: object) => scoped(() => target.exec(text, options), true);
      if (property === "transaction")
        return <T>(fn: (tx: Transaction) => Promise<T>) => scoped(() => target.transaction(fn), true);
      // Anything else is PGlite's own (private fields need the real instance as `this`).
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  let closed = false;
  return {
    client,
    session: () => ({
      async query<Row>(text: string, params: readonly unknown[] = []) {
        return (await client.query<Row>(text, params as unknown[])).rows;
      },
      async exec(script: string) {
        await client.exec(script);
      },
      transaction<T>(fn: (tx: SqlSession) => Promise<T>): Promise<T> {
        return client.transaction((tx) => fn(transactionSession(tx)));
      },
      async close() {},
    }),
    async close() {
      if (closed) return;
      closed = true;
      if (--shared.refs > 0) return;
      stores.delete(dataDir);
      const done = lock
        .run(async () => {
          if (!db.closed) await db.close();
        })
        .finally(() => {
          rmSync(shared.lockFile, { force: true });
          closing.delete(dataDir);
        });
      closing.set(
        dataDir,
        done.catch(() => {}),
      );
      await done;
    },
  };
}

/** A session over an open PGlite transaction (its statements already hold the store). */
function transactionSession(tx: Transaction): SqlSession {
  const session: SqlSession = {
    async query<Row>(text: string, params: readonly unknown[] = []) {
      return (await tx.query<Row>(text, params as unknown[])).rows;
    },
    async exec(script: string) {
      await tx.exec(script);
    },
    transaction: (fn) => fn(session),
    async close() {},
  };
  return session;
}
