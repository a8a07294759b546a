import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { status as grpcStatus } from "@grpc/grpc-js";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { seedTenant, TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { FLEET_OPERATOR_TOKEN } from "./harness/fleet";
import { type Acked, activityClient, bearer } from "./harness/grpc";
import { PgCluster } from "./harness/pg-cluster";
import { FleetProcess, poll } from "./harness/processes";
import { compareSequence, pause, StreamRecord } from "./harness/streams";
import { readLog } from "./harness/truth";

/**
 * Database faults under load (issue 29, deliverable 1), on a Postgres cluster of the suite's own:
 * a real cube process serves appends from a few stock grpc-js clients, a SubscribeActivity stream
 * held open and one reopened at its cursor every HOP_MS, while the suite (a) terminates every backend of the service's database, (b) restarts the
 * cluster with `-m immediate` and keeps it down a few seconds, (c) holds it read-only a few seconds
 * (`default_transaction_read_only`, as a failover's first moment). Every failed call must answer
 * UNAVAILABLE (never INTERNAL), the process must reconnect by itself, its health must say
 * NOT_SERVING while the database is down and SERVING after, and every acknowledged append must be
 * in the log and on the resumed stream exactly once, in order.
 */

/** How long each outage (the restart, the read-only moment) lasts at least. */
const OUTAGE_MS = 3_000;
/** UMX_DB_PROBE_MS of the cube: how often it checks the database for its readiness. */
const PROBE_MS = 500;
/** Concurrent appenders. */
const APPENDERS = 3;
/** How often the second stream is cancelled and reopened at its cursor. */
const HOP_MS = 700;
/** The service's database on the private cluster. */
const DATABASE = "unimatrix";

/** What one phase saw: the failed calls' codes and the stream's breaks. */
interface Failure {
  readonly at: number;
  readonly what: string;
  readonly code: string;
  readonly detail: string;
}

const codeOf = (error: unknown): string => {
  const code = (error as { code?: unknown }).code;
  return typeof code === "number" ? (grpcStatus[code] ?? String(code)) : `not a status: ${String(error)}`;
};

describe("fleet: database restart, terminated backends and a read-only moment under load", () => {
  let cluster: PgCluster | undefined;
  let skipped: string | undefined;
  let cube: FleetProcess;
  const acked: Acked[] = [];
  const failures: Failure[] = [];
  const stalls: string[] = [];
  const health: { at: number; status: string }[] = [];
  const marks: Record<string, number> = {};
  const streams = [
    new StreamRecord("SubscribeActivity held open", "grpc", "activity", ""),
    new StreamRecord(`SubscribeActivity reopened every ${HOP_MS} ms`, "grpc", "activity", ""),
  ];
  let log: { id: string }[] = [];
  let startedAt = 0;

  /** Waits until `n` more appends were acknowledged; a stall is recorded (and asserted) instead of ending the run. */
  const progress = async (n: number, what: string) => {
    const target = acked.length + n;
    await poll(() => acked.length >= target, `${n} appends ${what}`, 30_000, 50).catch((error: Error) =>
      stalls.push(error.message),
    );
  };
  const since = (at: number) => `+${((at - startedAt) / 1000).toFixed(1)}s`;

  beforeAll(async () => {
    const made = await PgCluster.create("dbfaults");
    if (typeof made === "string") {
      skipped = made;
      process.stderr.write(`\n[db-faults] SKIPPED: cannot create a private Postgres cluster: ${made}\n`);
      return;
    }
    cluster = made;
    await cluster.sql(`CREATE DATABASE ${DATABASE}`);
    const runDir = join(tmpdir(), `unimatrix-${cluster.name}`);
    mkdirSync(runDir, { recursive: true });
    cube = new FleetProcess(
      "cube-1",
      "cube",
      {
        DATABASE_URL: cluster.url(DATABASE),
        UMX_INTERNAL_KEY: TEST_INTERNAL_KEY,
        UMX_OPERATOR_TOKEN: FLEET_OPERATOR_TOKEN,
        UMX_BIND_HOST: "127.0.0.1",
        UMX_DB_PROBE_MS: String(PROBE_MS),
        LOG_LEVEL: "warn",
        UMX_SHUTDOWN_GRACE_MS: "2000",
      },
      runDir,
    );
    await cube.start();
    await cube.waitReady();
    const seeded = await seedTenant(
      { grpc: cube.address },
      { operatorToken: FLEET_OPERATOR_TOKEN, tenant: "dbfaults", cube: { name: "faults" }, clients: ["writer"] },
    );
    const cubeId = seeded.cubeId!;
    const token = seeded.clients[0]!.token;
    const client = activityClient(cube.address, true);
    const healthClient = createClient(Health, cube.address);
    const stop = new AbortController();
    const { signal } = stop;
    const stopStreams = new AbortController();
    const streamsDone = stopStreams.signal;
    startedAt = Date.now();

    const appender = async (worker: number) => {
      for (let n = 1; !signal.aborted; n++) {
        const message = `w${worker}-${n}`;
        try {
          const reply = await client.appendEntry(
            { cubeId, message, visibility: Visibility.BROADCAST },
            bearer(token, { deadline: Date.now() + 10_000 }),
          );
          acked.push({ id: reply.entry!.id, message, surface: "grpc", at: Date.now() });
        } catch (error) {
          failures.push({ at: Date.now(), what: "AppendEntry", code: codeOf(error), detail: String(error) });
          await pause(100, signal);
        }
        await pause(20, signal);
      }
    };
    /**
     * Follows SubscribeActivity, resuming after its last cursor whenever the stream ends or fails; with
     * `hopMs`, it also cancels and reopens it that often, so that streams open (catch up from the
     * database, authenticate) during every fault too.
     */
    const follow = async (stream: StreamRecord, hopMs?: number) => {
      while (!streamsDone.aborted) {
        stream.opens += 1;
        const hop = new AbortController();
        const end = () => hop.abort();
        streamsDone.addEventListener("abort", end, { once: true });
        const timer = hopMs ? setTimeout(end, hopMs) : undefined;
        const call = client.subscribeActivity({ cubeId, after: stream.cursor }, bearer(token, { signal: hop.signal }));
        try {
          for await (const message of call) {
            const { event } = message;
            if (event.case === "entry") stream.deliver(event.value.id, event.value.cursor);
            else if (event.case === "ready") stream.readyCount += 1;
            else if (event.case === "closed" || event.case === "goingAway") {
              if (event.value.cursor) stream.cursor = event.value.cursor;
              stream.breaks.push({ at: Date.now(), reason: event.case });
              break;
            }
          }
        } catch (error) {
          if (!hop.signal.aborted) {
            stream.breaks.push({ at: Date.now(), reason: codeOf(error) });
            failures.push({ at: Date.now(), what: "SubscribeActivity", code: codeOf(error), detail: String(error) });
            await pause(200, streamsDone);
          }
        } finally {
          clearTimeout(timer);
          streamsDone.removeEventListener("abort", end);
        }
      }
    };
    const watchHealth = async () => {
      while (!signal.aborted) {
        const seen = await healthClient
          .check({ service: "" }, { deadline: Date.now() + 500 })
          .then((answer) => HealthCheckResponse_ServingStatus[answer.status] ?? String(answer.status))
          .catch((error: unknown) => `error ${codeOf(error)}`);
        if (health.at(-1)?.status !== seen) health.push({ at: Date.now(), status: seen });
        await pause(100, signal);
      }
    };
    const load = [...Array.from({ length: APPENDERS }, (_, i) => appender(i + 1)), watchHealth()];
    const following = [follow(streams[0]!), follow(streams[1]!, HOP_MS)];

    await progress(30, "warm-up");
    marks.terminate = Date.now();
    const terminated = await cluster.terminateBackends(DATABASE);
    process.stderr.write(`[db-faults] ${since(marks.terminate)} terminated ${terminated} backends\n`);
    await progress(30, "after every backend was terminated");

    marks.stop = Date.now();
    await cluster.stopImmediately();
    process.stderr.write(`[db-faults] ${since(marks.stop)} cluster stopped (-m immediate)\n`);
    await poll(
      () => Date.now() - marks.stop! >= OUTAGE_MS && health.some((h) => h.at > marks.stop! && h.status !== "SERVING"),
      "the outage to last its length and health to leave SERVING",
      15_000,
    ).catch((error: Error) => stalls.push(error.message));
    marks.start = Date.now();
    await cluster.start();
    marks.started = Date.now();
    process.stderr.write(`[db-faults] ${since(marks.started)} cluster started again\n`);
    await poll(
      () => health.at(-1)?.status === "SERVING" && (health.at(-1)?.at ?? 0) > marks.start!,
      "health SERVING again",
      30_000,
    ).catch((error: Error) => stalls.push(error.message));
    await progress(30, "after the restart");

    marks.readOnly = Date.now();
    await cluster.setReadOnly(true);
    process.stderr.write(`[db-faults] ${since(marks.readOnly)} read-only\n`);
    await pause(OUTAGE_MS);
    await cluster.setReadOnly(false);
    marks.writable = Date.now();
    process.stderr.write(`[db-faults] ${since(marks.writable)} writable again\n`);
    await progress(30, "after the read-only moment");

    stop.abort();
    await Promise.all(load);
    log = await readLog(client, token, cubeId, "");
    // The streams catch up to the log they resumed on, then end.
    await poll(
      () => streams.every((stream) => stream.delivered.length >= log.length),
      "the streams to catch up",
      20_000,
    ).catch((error: Error) => stalls.push(error.message));
    stopStreams.abort();
    await Promise.all(following);
    client.close();
    healthClient.close();
    // Failed calls by fault (the phase they ended in) and code.
    const phaseOf = (at: number) =>
      at >= marks.writable!
        ? "after"
        : at >= marks.readOnly!
          ? "read-only"
          : at >= marks.stop!
            ? "restart"
            : "terminate";
    const counts: Record<string, Record<string, number>> = {};
    for (const f of failures) {
      const phase = counts[phaseOf(f.at)] ?? {};
      phase[`${f.what} ${f.code}`] = (phase[`${f.what} ${f.code}`] ?? 0) + 1;
      counts[phaseOf(f.at)] = phase;
    }
    process.stderr.write(
      `[db-faults] acked ${acked.length}, log ${log.length}, ${streams.map((r) => `${r.name}: ${r.delivered.length} (opened ${r.opens}x, ${r.breaks.length} breaks)`).join(", ")}; failed calls by fault and code ${JSON.stringify(counts)}\n` +
        `[db-faults] health: ${health.map((h) => `${h.status} ${since(h.at)}`).join(", ")}\n` +
        `[db-faults] marks: ${Object.entries(marks)
          .map(([k, v]) => `${k} ${since(v)}`)
          .join(", ")}\n`,
    );
  }, 240_000);

  afterAll(async () => {
    await cube?.stop(5_000);
    await cluster?.drop();
  }, 60_000);

  const unlessSkipped = (fn: () => void) => () => {
    if (skipped) {
      process.stderr.write(`[db-faults] skipped: ${skipped}\n`);
      return;
    }
    fn();
  };

  it(
    "every failed call answered UNAVAILABLE (never INTERNAL), and the faults did fail some",
    unlessSkipped(() => {
      const notUnavailable = failures.filter((f) => f.code !== "UNAVAILABLE");
      expect(notUnavailable.map((f) => `${since(f.at)} ${f.what} ${f.code}: ${f.detail}`)).toEqual([]);
      expect(failures.length).toBeGreaterThan(0);
    }),
  );

  it(
    "the service reconnected by itself: load went on after every fault with no restart",
    unlessSkipped(() => {
      expect(stalls).toEqual([]);
      expect({ running: cube.running, starts: cube.starts }).toEqual({ running: true, starts: 1 });
      expect(acked.filter((a) => a.at > (marks.writable ?? 0)).length).toBeGreaterThan(0);
    }),
  );

  it(
    "health said NOT_SERVING while the database was down and SERVING after it came back",
    unlessSkipped(() => {
      const during = health.filter((h) => h.at > marks.stop! && h.at < marks.start!);
      expect(during.map((h) => h.status)).toContain("NOT_SERVING");
      // The server accepts connections before `pg_ctlcluster start` returns: SERVING may come before `started`.
      const back = health.filter((h) => h.at > marks.start! && h.at < marks.readOnly!);
      expect(back.at(-1)?.status).toBe("SERVING");
      expect(health.at(-1)?.status).toBe("SERVING");
    }),
  );

  it(
    "health said NOT_SERVING while the database was read-only",
    unlessSkipped(() => {
      const during = health.filter((h) => h.at > marks.readOnly! && h.at < marks.writable!);
      expect(during.map((h) => h.status)).toContain("NOT_SERVING");
    }),
  );

  it(
    "every acknowledged append is in the log exactly once, and both streams delivered the log exactly once, in order",
    unlessSkipped(() => {
      const ids = log.map((e) => e.id);
      const counted = new Map<string, number>();
      for (const id of ids) counted.set(id, (counted.get(id) ?? 0) + 1);
      expect(
        acked.filter((a) => counted.get(a.id) !== 1).map((a) => `${a.message} x${counted.get(a.id) ?? 0}`),
      ).toEqual([]);
      const reports = streams.map((stream) => {
        const report = compareSequence(stream.name, ids, stream.keys());
        return { ...report, missing: report.missing.length };
      });
      expect(reports.map((r) => [r.name, r.exact, r.missing, r.duplicates, r.unexpected])).toEqual(
        streams.map((stream) => [stream.name, true, 0, [], []]),
      );
      // The second stream did resume, many times, through every fault.
      expect(streams[1]!.opens).toBeGreaterThan(10);
    }),
  );
});
