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
import { clusterUnavailable, PgCluster } from "./harness/pg-cluster";
import { FleetProcess, poll } from "./harness/processes";
import { compareSequence, pause, StreamRecord } from "./harness/streams";
import { readLog } from "./harness/truth";

/**
 * Database faults under load (issue 29, deliverable 1), on a Postgres cluster of the suite's own:
 * real cube, device, presence and gateway processes (one each, no Redis) serve appends from three
 * stock grpc-js clients straight to cube and one Connect JSON client through the gateway, a
 * SubscribeActivity stream held open and one reopened at its cursor every HOP_MS, while the suite
 * (a) terminates every backend of the services' database, (b) restarts the cluster with
 * `-m immediate` and keeps it down a few seconds, (c) holds it read-only a few seconds
 * (`default_transaction_read_only`, as a failover's first moment). Every failed call must answer
 * UNAVAILABLE (Connect: `unavailable`, 503; never INTERNAL), the processes must reconnect by
 * themselves, cube's health must say NOT_SERVING and the gateway's /readyz 503 while the database is
 * down or read-only and SERVING / 200 after, and every acknowledged append must be in the log and on
 * both streams exactly once, in order.
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

/** Why the suite cannot run here (it needs a Postgres cluster of its own), or undefined. */
const unavailable = clusterUnavailable();
if (unavailable)
  process.stderr.write(`\n[db-faults] SKIPPED: cannot create a private Postgres cluster: ${unavailable}\n`);

(unavailable ? describe.skip : describe)(
  "fleet: database restart, terminated backends and a read-only moment under load",
  () => {
    let cluster: PgCluster | undefined;
    let cube: FleetProcess;
    let gateway: FleetProcess;
    const processes: FleetProcess[] = [];
    /** The gateway's /readyz answers (HTTP status), each change with its time. */
    const readyz: { at: number; status: string }[] = [];
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
      cluster = await PgCluster.create("dbfaults");
      await cluster.sql(`CREATE DATABASE ${DATABASE}`);
      const runDir = join(tmpdir(), `unimatrix-${cluster.name}`);
      mkdirSync(runDir, { recursive: true });
      const common = {
        DATABASE_URL: cluster.url(DATABASE),
        UMX_INTERNAL_KEY: TEST_INTERNAL_KEY,
        UMX_OPERATOR_TOKEN: FLEET_OPERATOR_TOKEN,
        UMX_BIND_HOST: "127.0.0.1",
        UMX_DB_PROBE_MS: String(PROBE_MS),
        LOG_LEVEL: "warn",
        UMX_SHUTDOWN_GRACE_MS: "2000",
      };
      cube = new FleetProcess("cube-1", "cube", common, runDir);
      const device = new FleetProcess("device-1", "device", common, runDir);
      processes.push(cube, device);
      await Promise.all([cube.start(), device.start()]);
      await Promise.all([cube.waitReady(), device.waitReady()]);
      const presence = new FleetProcess(
        "presence-1",
        "presence",
        { ...common, PRESENCE_CUBE_ADDRESS: cube.address },
        runDir,
      );
      processes.push(presence);
      await presence.start();
      await presence.waitReady();
      gateway = new FleetProcess(
        "gateway-1",
        "gateway",
        {
          ...common,
          DATABASE_URL: "",
          CUBE_ADDRESS: cube.address,
          DEVICE_ADDRESS: device.address,
          PRESENCE_ADDRESS: presence.address,
          GATEWAY_RATE_LIMIT_PER_SECOND: "0",
        },
        runDir,
      );
      processes.push(gateway);
      await gateway.start();
      await gateway.waitReady();
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
          const call = client.subscribeActivity(
            { cubeId, after: stream.cursor },
            bearer(token, { signal: hop.signal }),
          );
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
      /** Appends through the gateway as any script does (Connect JSON); a failure is recorded by its Connect code. */
      const connectAppender = async () => {
        for (let n = 1; !signal.aborted; n++) {
          const message = `c-${n}`;
          try {
            const response = await fetch(`http://${gateway.address}/unimatrix.cube.v1.ActivityService/AppendEntry`, {
              method: "POST",
              headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
              body: JSON.stringify({ cubeId, message, visibility: "VISIBILITY_BROADCAST" }),
              signal: AbortSignal.timeout(10_000),
            });
            const body = (await response.json()) as { entry?: { id: string }; code?: string; message?: string };
            if (response.status === 200 && body.entry)
              acked.push({ id: body.entry.id, message, surface: "connect", at: Date.now() });
            else {
              const code = `${(body.code ?? "none").toUpperCase()} (HTTP ${response.status})`;
              failures.push({ at: Date.now(), what: "Connect AppendEntry", code, detail: body.message ?? "" });
              await pause(100, signal);
            }
          } catch (error) {
            failures.push({ at: Date.now(), what: "Connect AppendEntry", code: "network", detail: String(error) });
            await pause(100, signal);
          }
          await pause(20, signal);
        }
      };
      const watchReadyz = async () => {
        while (!signal.aborted) {
          const seen = await fetch(`http://${gateway.address}/readyz`, { signal: AbortSignal.timeout(2_000) })
            .then(async (answer) => {
              await answer.body?.cancel();
              return String(answer.status);
            })
            .catch((error: Error) => `error ${error.name}`);
          if (readyz.at(-1)?.status !== seen) readyz.push({ at: Date.now(), status: seen });
          await pause(100, signal);
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
      const load = [
        ...Array.from({ length: APPENDERS }, (_, i) => appender(i + 1)),
        connectAppender(),
        watchHealth(),
        watchReadyz(),
      ];
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
      // Readiness comes back at the probe's next round (UMX_DB_PROBE_MS): wait for it to be seen.
      await poll(
        () => health.at(-1)?.status === "SERVING" && readyz.at(-1)?.status === "200",
        "health SERVING and /readyz 200 after the read-only moment",
        20_000,
      );

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
          `[db-faults] /readyz: ${readyz.map((h) => `${h.status} ${since(h.at)}`).join(", ")}\n` +
          `[db-faults] marks: ${Object.entries(marks)
            .map(([k, v]) => `${k} ${since(v)}`)
            .join(", ")}\n`,
      );
    }, 240_000);

    afterAll(async () => {
      await Promise.all(processes.reverse().map((p) => p.stop(5_000)));
      await cluster?.drop();
    }, 60_000);

    it("every failed call answered UNAVAILABLE (never INTERNAL), and the faults did fail some", () => {
      // gRPC's UNAVAILABLE, or Connect's `unavailable` (HTTP 503) through the gateway.
      const notUnavailable = failures.filter((f) => f.code !== "UNAVAILABLE" && f.code !== "UNAVAILABLE (HTTP 503)");
      expect(notUnavailable.map((f) => `${since(f.at)} ${f.what} ${f.code}: ${f.detail}`)).toEqual([]);
      expect(failures.length).toBeGreaterThan(0);
    });

    it("the service reconnected by itself: load went on after every fault with no restart", () => {
      expect(stalls).toEqual([]);
      expect(processes.map((p) => [p.name, p.running, p.starts])).toEqual(processes.map((p) => [p.name, true, 1]));
      expect(new Set(acked.filter((a) => a.at > (marks.writable ?? 0)).map((a) => a.surface))).toEqual(
        new Set(["grpc", "connect"]),
      );
      expect(acked.filter((a) => a.at > (marks.writable ?? 0)).length).toBeGreaterThan(0);
    });

    it("health said NOT_SERVING (and /readyz 503) while the database was down, SERVING (200) after it came back", () => {
      const during = health.filter((h) => h.at > marks.stop! && h.at < marks.start!);
      expect(during.map((h) => h.status)).toContain("NOT_SERVING");
      // The server accepts connections before `pg_ctlcluster start` returns: SERVING may come before `started`.
      const back = health.filter((h) => h.at > marks.start! && h.at < marks.readOnly!);
      expect(back.at(-1)?.status).toBe("SERVING");
      expect(health.at(-1)?.status).toBe("SERVING");
      // The gateway's /readyz asks the services' health: not ready meanwhile, ready after.
      expect(readyz.filter((h) => h.at > marks.stop! && h.at < marks.start!).map((h) => h.status)).toContain("503");
      expect(readyz.filter((h) => h.at > marks.start! && h.at < marks.readOnly!).at(-1)?.status).toBe("200");
      expect(readyz.at(-1)?.status).toBe("200");
    });

    it("health said NOT_SERVING (and /readyz 503) while the database was read-only", () => {
      const during = health.filter((h) => h.at > marks.readOnly! && h.at < marks.writable!);
      expect(during.map((h) => h.status)).toContain("NOT_SERVING");
      const notReady = readyz.filter((h) => h.at > marks.readOnly! && h.at < marks.writable!);
      expect(notReady.map((h) => h.status)).toContain("503");
    });

    it("every acknowledged append is in the log exactly once, and both streams delivered the log exactly once, in order", () => {
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
    });
  },
);
