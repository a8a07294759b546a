/**
 * Device benchmark: heartbeats/s and placements/s over real gRPC (stock grpc-js client, signed
 * principals as the gateway sends them) at 8 and 64 concurrent callers, each next to its floor in
 * the same run: a bare grpc-js handler running the RPC's own statement as one raw `pg` query, no
 * auth (kit `startFloor`), in the same worker thread as the service (its own event loop, as in a
 * deployment), with the same pool size. The placement's floor runs PlaceSession's own statement
 * (as the cube's append floor runs the append's); the earlier placement floor, an `UPDATE` of one
 * existing placement row, is measured beside it (`update_floor_*`, docs/decisions.md says why it
 * changed). A raw `pg` statement from the callers' thread (no gRPC) is shown too. Prints `BENCH`
 * lines for the 8-caller figures.
 *
 *   npm run bench device     (needs Postgres at TEST_DATABASE_URL and Redis at TEST_REDIS_URL)
 */
import { randomBytes, randomUUID } from "node:crypto";
import { cpus, loadavg } from "node:os";
import { Worker } from "node:worker_threads";
import * as grpc from "@grpc/grpc-js";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { DevicePlatform } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { type Principal, signPrincipal } from "@unimatrix/service-kit/auth";
import { commonEnv, readConfig } from "@unimatrix/service-kit/config";
import { createClient } from "@unimatrix/service-kit/grpc";
import { bench, floorClient } from "@unimatrix/service-kit/testing";
import pg from "pg";

const DATABASE_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const KEY = randomBytes(32).toString("hex");
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const POOL = 10; // the service's pool size (kit default); the raw baseline gets the same.

/** Runs `op(worker)` in `workers` loops for SECONDS; returns completed operations per second. */
async function rate(
  workers: number,
  op: (worker: number, i: number) => Promise<unknown>,
  seconds = SECONDS,
): Promise<number> {
  const until = Date.now() + seconds * 1000;
  let done = 0;
  const started = Date.now();
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      let i = 0;
      while (Date.now() < until) {
        await op(worker, i);
        i += 1;
        done += 1;
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  lastCpuPerOp = (used.user + used.system) / Math.max(done, 1);
  return done / ((Date.now() - started) / 1000);
}

/** This process's CPU (all threads: callers, service worker, raw pool) per operation of the last `rate`, µs. */
let lastCpuPerOp = 0;

async function main(): Promise<void> {
  const schema = `bench_device_${randomBytes(4).toString("hex")}`;
  const config = {
    ...readConfig(commonEnv, {}),
    databaseUrl: DATABASE_URL,
    redisUrl: REDIS_URL,
    internalKey: KEY,
    busPrefix: `bench-${randomBytes(4).toString("hex")}`,
    bindHost: "127.0.0.1",
    logLevel: "silent" as const,
  };
  const service = await startInWorker(config, schema);
  const address = `127.0.0.1:${service.port}`;
  const enrollment = createClient(EnrollmentService, address);
  const devices = createClient(DeviceService, address);
  const placement = createClient(PlacementService, address);
  const raw = new pg.Pool({ connectionString: DATABASE_URL, max: POOL, options: `-c search_path=${schema}` });
  const as = (p: Principal) => ({ metadata: { "x-umx-principal": signPrincipal(p, KEY, Date.now(), 3_600_000) } });
  try {
    const tenantId = randomUUID();
    const user: Principal = { kind: "user", tenantId, subjectId: randomUUID() };
    const fleet: { id: string; generation: bigint; auth: ReturnType<typeof as> }[] = [];
    for (let i = 0; i < 64; i += 1) {
      const issued = await enrollment.issueEnrollToken({ ttlSeconds: 600 }, as(user));
      const enrolled = await devices.enrollDevice({
        enrollToken: issued.token,
        publicKey: randomBytes(32).toString("hex"),
        platform: DevicePlatform.LINUX,
      });
      const id = enrolled.device?.id ?? "";
      const auth = as({ kind: "device", tenantId, subjectId: id });
      const { generation } = await devices.acquireConnection({ deviceId: id }, auth);
      fleet.push({ id, generation, auth });
    }
    // Rows for the raw placement baseline: one per worker, so raw updates never wait on each other.
    for (let i = 0; i < 64; i += 1) {
      await raw.query(
        `INSERT INTO placements (tenant_id, root_session_id, device_id, owner_subject_id, rev, placed_at, updated_at)
         VALUES ($1, $2, $3, $4, 1, now(), now())`,
        [tenantId, `raw-${i}`, fleet[i]?.id, user.subjectId],
      );
    }
    const userAuth = as(user);
    const echo = echoClient(`127.0.0.1:${service.echoPort}`);
    const floor = floorClient(`127.0.0.1:${service.floorPort}`);
    floorClose = () => floor.close();
    const HEARTBEAT_SQL = `UPDATE devices SET lease_expires_at = $1, rev = rev + 1, updated_at = $2
             WHERE id = $3 AND connection_generation = $4 AND status = 'active' AND lease_expires_at > $2
             RETURNING lease_expires_at`;
    const PLACEMENT_SQL = `UPDATE placements SET device_id = $1, rev = rev + 1, updated_at = now()
             WHERE tenant_id = $2 AND root_session_id = $3 RETURNING rev`;
    // PlaceSession's own statement (store/placements.ts placeSession), its parameters in order:
    // tenant, owner (NULL: a USER caller), device, root session, now, audit row id, actor.
    const PLACE_SQL = `WITH d AS (
        SELECT id, tenant_id, owner_subject_id, status,
          ($1::uuid IS NULL OR tenant_id = $1::uuid) AND ($2::uuid IS NULL OR owner_subject_id = $2::uuid) AS visible
        FROM devices WHERE id = $3::uuid FOR SHARE
      ), ins AS (
        INSERT INTO placements AS p (tenant_id, root_session_id, device_id, owner_subject_id, rev, placed_at, updated_at)
        SELECT tenant_id, $4, id, owner_subject_id, 1, $5, $5 FROM d
        WHERE d.visible AND d.status = 'active'
        ON CONFLICT (tenant_id, root_session_id) DO NOTHING
        RETURNING p.root_session_id, p.device_id::text, p.rev, p.placed_at, p.updated_at
      ), aud AS (
        INSERT INTO audit_events (id, tenant_id, owner_subject_id, event_type, device_id, actor_id, root_session_id, detail, at)
        SELECT $6::uuid, d.tenant_id, d.owner_subject_id, 'session_placed', d.id, $7, ins.root_session_id,
          '{"rev":1}'::jsonb, $5
        FROM ins, d
        RETURNING seq
      )
      SELECT d.tenant_id::text, d.owner_subject_id::text, d.status, d.visible, (SELECT seq FROM aud) AS seq,
        ins.root_session_id, ins.device_id, ins.rev, ins.placed_at, ins.updated_at, NULL::text AS active_run_id
      FROM d LEFT JOIN ins ON TRUE`;
    const ops = {
      heartbeat: {
        service: async (w: number) => {
          const d = fleet[w];
          const r = await devices.heartbeatConnection(
            { deviceId: d?.id ?? "", generation: d?.generation ?? 0n },
            d?.auth,
          );
          if (!r.ok) throw new Error("heartbeat fenced");
        },
        raw: async (w: number) => {
          const now = new Date();
          const { rows } = await raw.query(
            `UPDATE devices SET lease_expires_at = $1, rev = rev + 1, updated_at = $2
             WHERE id = $3 AND connection_generation = $4 AND status = 'active' AND lease_expires_at > $2
             RETURNING lease_expires_at`,
            [new Date(now.getTime() + 600_000), now, fleet[w]?.id, fleet[w]?.generation.toString()],
          );
          if (rows.length !== 1) throw new Error("raw heartbeat missed");
        },
        floor: async (w: number) => {
          const now = new Date();
          const n = await floor.query(HEARTBEAT_SQL, [
            new Date(now.getTime() + 600_000).toISOString(),
            now.toISOString(),
            fleet[w]?.id,
            fleet[w]?.generation.toString(),
          ]);
          if (n !== 1) throw new Error("floor heartbeat missed");
        },
      },
      placement: {
        service: async (w: number) => {
          placed += 1;
          const r = await placement.placeSession(
            { rootSessionId: `s-${w}-${placed}`, deviceId: fleet[w]?.id ?? "" },
            userAuth,
          );
          if (r.outcome !== 1) throw new Error(`placement outcome ${r.outcome}`);
        },
        raw: async (w: number) => {
          placed += 1;
          const { rows } = await raw.query(PLACE_SQL, [
            tenantId,
            null,
            fleet[w]?.id,
            `r-${w}-${placed}`,
            new Date(),
            randomUUID(),
            user.subjectId,
          ]);
          if (rows[0]?.seq === null || rows[0]?.seq === undefined) throw new Error("raw placement missed");
        },
        floor: async (w: number) => {
          placed += 1;
          const n = await floor.query(PLACE_SQL, [
            tenantId,
            null,
            fleet[w]?.id,
            `f-${w}-${placed}`,
            new Date().toISOString(),
            randomUUID(),
            user.subjectId,
          ]);
          if (n !== 1) throw new Error("floor placement missed");
        },
        updateFloor: async (w: number) => {
          const n = await floor.query(PLACEMENT_SQL, [fleet[w]?.id, tenantId, `raw-${w}`]);
          if (n !== 1) throw new Error("update floor placement missed");
        },
      },
    };
    let placed = 0;
    const results: {
      what: string;
      workers: number;
      service: number;
      floor: number;
      raw: number;
      serviceCpu: number;
      floorCpu: number;
      /** The earlier floor's rate (placement only). */
      updateFloor: number | undefined;
    }[] = [];
    const transport: { workers: number; echo: number; cpu: number }[] = [];
    for (const workers of [8, 64]) {
      for (const [what, op] of Object.entries(ops)) {
        const updateFloor = "updateFloor" in op ? op.updateFloor : undefined;
        // Warm up, then alternate service, floor and raw twice and keep each one's best (the box is shared).
        await rate(workers, op.service, 1);
        await rate(workers, op.floor, 1);
        await rate(workers, op.raw, 1);
        if (updateFloor) await rate(workers, updateFloor, 1);
        const best = { service: 0, floor: 0, raw: 0, serviceCpu: Infinity, floorCpu: Infinity, updateFloor: 0 };
        for (let round = 0; round < 2; round += 1) {
          best.service = Math.max(best.service, await rate(workers, op.service));
          best.serviceCpu = Math.min(best.serviceCpu, lastCpuPerOp);
          best.floor = Math.max(best.floor, await rate(workers, op.floor));
          best.floorCpu = Math.min(best.floorCpu, lastCpuPerOp);
          best.raw = Math.max(best.raw, await rate(workers, op.raw));
          if (updateFloor) best.updateFloor = Math.max(best.updateFloor, await rate(workers, updateFloor));
        }
        results.push({ what, workers, ...best, updateFloor: updateFloor ? best.updateFloor : undefined });
      }
      transport.push({ workers, echo: await rate(workers, () => echo()), cpu: lastCpuPerOp });
    }
    const pad = (s: string, n: number) => s.padStart(n);
    const load = loadavg()
      .map((x) => x.toFixed(2))
      .join(" ");
    process.stdout.write(
      `device bench: ${SECONDS}s per figure (best of 2), pool ${POOL}, ${cpus().length} cores, load ${load}\n`,
    );
    process.stdout.write(
      `${"operation".padEnd(12)}${pad("callers", 8)}${pad("service/s", 11)}${pad("floor/s", 9)}${pad("share", 7)}${pad("raw pg/s", 10)}${pad("svc cpu µs/op", 15)}${pad("floor cpu µs/op", 17)}\n`,
    );
    for (const r of results) {
      process.stdout.write(
        `${r.what.padEnd(12)}${pad(String(r.workers), 8)}${pad(r.service.toFixed(0), 11)}${pad(r.floor.toFixed(0), 9)}${pad(`${((r.service / r.floor) * 100).toFixed(0)}%`, 7)}${pad(r.raw.toFixed(0), 10)}${pad(r.serviceCpu.toFixed(0), 15)}${pad(r.floorCpu.toFixed(0), 17)}\n`,
      );
    }
    process.stdout.write(
      "floor: bare grpc-js handler + the RPC's own statement as one raw pg query, no auth, in the service's worker thread\n",
    );
    for (const r of results.filter((x) => x.updateFloor !== undefined)) {
      process.stdout.write(
        `${r.what} at ${r.workers} callers beside the earlier floor (UPDATE of one placement row): ${r.updateFloor?.toFixed(0)}/s, share ${((r.service / (r.updateFloor ?? 1)) * 100).toFixed(0)}%\n`,
      );
    }
    process.stdout.write("raw pg: the same statement from the callers' thread, no gRPC\n");
    process.stdout.write("transport ceiling (bare grpc-js echo in the same worker, no auth, no database):\n");
    for (const t of transport)
      process.stdout.write(
        `  ${String(t.workers).padStart(3)} callers: ${t.echo.toFixed(0)} calls/s, ${t.cpu.toFixed(0)} cpu µs/op\n`,
      );
    for (const r of results) {
      const name = r.what === "heartbeat" ? "heartbeat" : "placement";
      const suffix = r.workers === 8 ? "" : `.c${r.workers}`;
      bench(`device.${name}.per_s${suffix}`, r.service, "1/s");
      bench(`device.${name}.floor_per_s${suffix}`, r.floor, "1/s");
      bench(`device.${name}.floor_share${suffix}`, r.service / r.floor, "ratio");
      if (r.updateFloor !== undefined) {
        bench(`device.${name}.update_floor_per_s${suffix}`, r.updateFloor, "1/s");
        bench(`device.${name}.update_floor_share${suffix}`, r.service / r.updateFloor, "ratio");
      }
      if (r.workers === 8) bench(`device.${name}.cpu_us`, r.serviceCpu, "us");
    }
  } finally {
    echoClose();
    floorClose();
    enrollment.close();
    devices.close();
    placement.close();
    await service.stop();
    await raw.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await raw.end();
  }
}

let echoClose = () => {};
let floorClose = () => {};
/** A stock grpc-js client of the bare echo server: the transport's own cost, for reference. */
function echoClient(address: string): () => Promise<void> {
  const id = (b: Buffer) => b;
  const definition = {
    echo: {
      path: "/bench.Echo/Echo",
      requestStream: false,
      responseStream: false,
      requestSerialize: id,
      requestDeserialize: id,
      responseSerialize: id,
      responseDeserialize: id,
    },
  };
  const Client = grpc.makeGenericClientConstructor(definition as grpc.ServiceDefinition, "Echo");
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    echo(request: Buffer, callback: (error: unknown) => void): void;
  };
  echoClose = () => client.close();
  const payload = Buffer.from("heartbeat-sized payload of about fifty bytes......");
  return () => new Promise<void>((resolve, reject) => client.echo(payload, (e) => (e ? reject(e) : resolve())));
}

/** Starts the device service (compiled dist) in a worker thread; resolves with its port and a stop. */
function startInWorker(
  config: unknown,
  schema: string,
): Promise<{ port: number; echoPort: number; floorPort: number; stop(): Promise<void> }> {
  const source = `
    const { parentPort, workerData } = require("node:worker_threads");
    const grpc = require("@grpc/grpc-js");
    const { startDevice } = require("@unimatrix/device");
    const { startFloor } = require("@unimatrix/service-kit/testing");
    const pg = require("pg");
    const id = (b) => b;
    const echo = new grpc.Server();
    echo.addService({ echo: { path: "/bench.Echo/Echo", requestStream: false, responseStream: false,
      requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id } },
      { echo: (call, callback) => callback(null, call.request) });
    const echoPort = new Promise((resolve, reject) =>
      echo.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    startDevice({ config: workerData.config, port: 0, schema: workerData.schema, leaseSeconds: 600, sweepMs: 0 }).then(
      async (service) => {
        const pool = new pg.Pool({ connectionString: workerData.config.databaseUrl, max: workerData.pool,
          options: "-c search_path=" + workerData.schema });
        const floor = await startFloor(pool);
        parentPort.postMessage({ port: service.port, echoPort: await echoPort, floorPort: floor.port });
        parentPort.on("message", () => floor.stop().then(() => pool.end()).then(() => service.stop())
          .then(() => parentPort.postMessage({ stopped: true })));
      },
      (error) => parentPort.postMessage({ error: String(error && error.stack) }),
    );`;
  const worker = new Worker(source, { eval: true, workerData: { config, schema, pool: POOL } });
  return new Promise((resolve, reject) => {
    worker.once("error", reject);
    worker.once("message", (message: { port?: number; echoPort?: number; floorPort?: number; error?: string }) => {
      if (message.error || message.port === undefined) return reject(new Error(message.error ?? "no port"));
      resolve({
        port: message.port,
        echoPort: message.echoPort ?? 0,
        floorPort: message.floorPort ?? 0,
        stop: () =>
          new Promise<void>((done) => {
            worker.once("message", () => worker.terminate().then(() => done()));
            worker.postMessage("stop");
          }),
      });
    });
  });
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
