// Transition → watcher latency, presence beside its floor at one point: both watched at once
// (the same watcher count, in separate client processes), taking turns driving transitions in
// short slices (`slices.ts`), so that both sides see the same machine.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  MachineService,
  WatchMachinesResponseSchema,
} from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { startFanOutFloor, TEST_DATABASE_URL, TEST_REDIS_URL } from "@unimatrix/service-kit/testing";
import { Redis } from "ioredis";
import pg from "pg";
import { rawTables } from "./churn";
import { driveSlices, type SliceJob } from "./slices";

/** One point's job, as the client processes read it (`clients.ts`). */
export interface LatencyJob {
  readonly address: string;
  readonly tenantId: string;
  readonly watchers: number;
  readonly tokens: readonly string[];
  readonly rate: number;
  readonly warmup: number;
  readonly sliceMs: number;
  readonly slices: number;
}

/** What one side's watchers saw. */
export interface Watched {
  readonly samples: number[];
  readonly received: number;
  readonly duplicates: number;
  readonly perWatcher: number[];
  /** Transitions the side's driver made (the floor's; presence's count is the log's). */
  readonly driven: number;
}

interface Clients {
  readonly ready: Promise<void>;
  go(at: number): void;
  readonly done: Promise<Watched>;
}

/**
 * Runs `job.watchers` watchers in `processes` child processes (same tsx loader), and with `drive`
 * one more that only drives presence's links: decoding 100 streams is client work and must not
 * starve the driver or the server, and a driver that shares a loop with decoding falls behind and
 * catches up in bursts.
 */
function spawnClients(job: LatencyJob, processes: number, drive: boolean): Clients {
  const roles = [
    ...Array.from({ length: processes }, (_, k) => ({
      watchers: Math.floor(job.watchers / processes) + (k < job.watchers % processes ? 1 : 0),
      offset: k * Math.ceil(job.watchers / processes),
      drive: false,
    })),
    ...(drive ? [{ watchers: 0, offset: 0, drive: true }] : []),
  ];
  const children = roles.map((role) => {
    const child = spawn(process.execPath, [...process.execArgv, join(__dirname, "clients.ts")], {
      env: { ...process.env, BENCH_JOB: JSON.stringify({ ...job, ...role }) },
      stdio: ["pipe", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    const ready = new Promise<void>((resolve) => {
      const check = () => (out.includes("READY") ? resolve() : setTimeout(check, 10));
      check();
    });
    const done = new Promise<{ samples: number[]; driven: number; duplicates: number; perWatcher: number[] }>(
      (resolve, reject) =>
        child.on("close", (code) =>
          code === 0 ? resolve(JSON.parse(out.trim().split("\n").at(-1) ?? "{}")) : reject(new Error(`exit ${code}`)),
        ),
    );
    return { child, ready, done };
  });
  return {
    ready: Promise.all(children.map((c) => c.ready)).then(() => undefined),
    go: (at) => {
      for (const c of children) c.child.stdin?.write(`${at}\n`);
    },
    done: Promise.all(children.map((c) => c.done)).then((results) => ({
      samples: results.flatMap((r) => r.samples),
      received: results.reduce((n, r) => n + r.perWatcher.reduce((a, b) => a + b, 0), 0),
      duplicates: results.reduce((n, r) => n + r.duplicates, 0),
      perWatcher: results.flatMap((r) => r.perWatcher),
      driven: results.reduce((n, r) => n + r.driven, 0),
    })),
  };
}

/**
 * The floor of the watch fan-out: per transition one raw pg transaction (row lock, insert event,
 * update row) and one Redis publish; one Redis subscriber turns each into a transition message,
 * encodes it once and writes it to every stream of a bare grpc-js server (kit
 * `startFanOutFloor`) at WatchMachines' own path. No auth, no ORM, no feed.
 */
async function startFloorTarget(schema: string) {
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 4, options: `-c search_path=${schema}` });
  await rawTables(pool);
  const ready = toBinary(
    WatchMachinesResponseSchema,
    create(WatchMachinesResponseSchema, { event: { case: "machineReady", value: { cursor: "0" } } }),
  );
  const floor = await startFanOutFloor(`/${MachineService.typeName}/WatchMachines`, [ready]);
  const publisher = new Redis(TEST_REDIS_URL);
  const subscriber = new Redis(TEST_REDIS_URL);
  const channel = `bench-floor-${randomUUID()}`;
  await subscriber.subscribe(channel);
  subscriber.on("message", (_c: string, message: string) => {
    const [seq, id, linked, at] = message.split(" ");
    const value = {
      cursor: seq as string,
      machineId: `00000000-0000-4000-8000-${String(id).padStart(12, "0")}`,
      name: `live-${id}`,
      at: timestampFromMs(Number(at)),
    };
    const event =
      linked === "t" ? { case: "machineLinked" as const, value } : { case: "machineUnlinked" as const, value };
    floor.send(toBinary(WatchMachinesResponseSchema, create(WatchMachinesResponseSchema, { event })));
  });
  const transition = async (id: number) => {
    const at = Date.now();
    const client = await pool.connect();
    let message: string;
    try {
      await client.query("BEGIN");
      const row = await client.query("SELECT linked FROM raw_state WHERE id = $1 FOR UPDATE", [id]);
      const linked = !row.rows[0].linked;
      const event = await client.query("INSERT INTO raw_events (id, linked, at) VALUES ($1, $2, now()) RETURNING seq", [
        id,
        linked,
      ]);
      await client.query("UPDATE raw_state SET linked = $2 WHERE id = $1", [id, linked]);
      await client.query("COMMIT");
      message = `${event.rows[0].seq} ${id} ${linked ? "t" : "f"} ${at}`;
    } finally {
      client.release();
    }
    await publisher.publish(channel, message);
  };
  return {
    address: `127.0.0.1:${floor.port}`,
    /** Drives the floor's slices of `job`; resolves with the transitions made, once all landed. */
    async drive(job: SliceJob): Promise<number> {
      const pending: Promise<void>[] = [];
      const driven = await driveSlices(job, 1, (n) => pending.push(transition(n % 60)));
      await Promise.all(pending);
      return driven;
    },
    async stop(): Promise<void> {
      subscriber.disconnect();
      publisher.disconnect();
      await floor.stop();
      await pool.end();
    },
  };
}

/** Presence (at `job.address`) and its floor at one point, watched at once, driven in alternating slices. */
export async function pairedLatency(
  job: LatencyJob,
  processes: number,
  schema: string,
): Promise<{ service: Watched; floor: Watched }> {
  const floor = await startFloorTarget(schema);
  try {
    const service = spawnClients(job, processes, true);
    const floorClients = spawnClients({ ...job, address: floor.address, tokens: [] }, processes, false);
    await Promise.all([service.ready, floorClients.ready]);
    const go = Date.now() + 50;
    service.go(go);
    floorClients.go(go);
    const driven = await floor.drive({
      go,
      warmup: job.warmup,
      sliceMs: job.sliceMs,
      slices: job.slices,
      rate: job.rate,
    });
    const [served, floored] = await Promise.all([service.done, floorClients.done]);
    return { service: served, floor: { ...floored, driven } };
  } finally {
    await floor.stop();
  }
}
