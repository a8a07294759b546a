// Benchmark plumbing shared by services/*/bench: the floor server (a bare grpc-js handler running
// one raw `pg` statement, no auth, no ORM), closed-loop and fixed-rate drivers, percentiles and
// the machine-readable `BENCH <name> <value> <unit>` lines that `npm run bench` collects.
// Hand-written because it is ~100 lines of glue over grpc-js and pg, not a library's job.
import { loadavg } from "node:os";
import * as grpc from "@grpc/grpc-js";
import type pg from "pg";

/** Seconds each timed figure runs for (`BENCH_SECONDS`; the short mode sets it low). */
export const benchSeconds = (fallback: number): number => Number(process.env.BENCH_SECONDS ?? fallback);

/** Monotonic milliseconds. */
export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** The p-th percentile of ascending `sorted` (NaN when empty). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

/** Least-squares slope of `points` (x in milliseconds) per hour; NaN with fewer than two distinct x (a soak's creep). */
export function slopePerHour(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : (num / den) * 3_600_000;
}

/**
 * The floor of a sawtooth: the lowest point of each run of `perWindow` consecutive points, at the
 * window's mean time. Memory rises between collections and falls at each; a leak lifts the floor,
 * while a slope through every point mostly measures where in its cycle the collector was sampled.
 */
export function floors(points: readonly { x: number; y: number }[], perWindow: number): { x: number; y: number }[] {
  const out: { x: number; y: number }[] = [];
  for (let i = 0; i < points.length; i += perWindow) {
    const window = points.slice(i, i + perWindow);
    out.push({
      x: window.reduce((sum, p) => sum + p.x, 0) / window.length,
      y: Math.min(...window.map((p) => p.y)),
    });
  }
  return out;
}

/** The 1, 5 and 15 minute load averages, as printed beside every run's figures. */
export const loadAverage = (): string =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");

/** Prints one machine-readable figure: `BENCH <name> <value> <unit>` (names are stable across runs). */
export function bench(name: string, value: number, unit: string): void {
  const shown = Number.isFinite(value) ? Number(value.toPrecision(4)).toString() : "NaN";
  process.stdout.write(`BENCH ${name} ${shown} ${unit}\n`);
}

/** Runs `op` on `workers` closed loops for `seconds`; returns operations/s and ascending latencies (ms). */
export async function closedLoop(
  workers: number,
  seconds: number,
  op: (worker: number, i: number) => Promise<unknown>,
): Promise<{ perSecond: number; latencies: number[] }> {
  const latencies: number[] = [];
  const started = nowMs();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      for (let i = 0; nowMs() < until; i++) {
        const t = nowMs();
        await op(worker, i);
        latencies.push(nowMs() - t);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return { perSecond: latencies.length / ((nowMs() - started) / 1000), latencies };
}

const FLOOR_PATH = "/bench.Floor/Query";
const passthrough = (b: Buffer) => b;
const floorDefinition = {
  query: {
    path: FLOOR_PATH,
    requestStream: false,
    responseStream: false,
    requestSerialize: passthrough,
    requestDeserialize: passthrough,
    responseSerialize: passthrough,
    responseDeserialize: passthrough,
  },
} as const;

/**
 * Starts the floor: a bare grpc-js server whose one method runs the one SQL statement it is sent
 * (`{sql, params}` as JSON) on `pool` and answers with the row count. The physical limit of this
 * machine for an RPC that does one statement's work.
 */
export async function startFloor(pool: pg.Pool): Promise<{ port: number; stop(): Promise<void> }> {
  const server = new grpc.Server();
  server.addService(floorDefinition as unknown as grpc.ServiceDefinition, {
    query: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      const { sql, params } = JSON.parse(call.request.toString()) as { sql: string; params: unknown[] };
      pool.query(sql, params).then(
        (r) => callback(null, Buffer.from(String(r.rowCount ?? 0))),
        (e: Error) => callback({ code: grpc.status.INTERNAL, details: e.message }),
      );
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, stop: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())) };
}

/** A stock grpc-js client of the floor: `query(sql, params)` resolves with the statement's row count. */
export function floorClient(address: string): {
  query(sql: string, params: unknown[]): Promise<number>;
  close(): void;
} {
  const Client = grpc.makeGenericClientConstructor(floorDefinition as unknown as grpc.ServiceDefinition, "Floor");
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    query(request: Buffer, callback: (error: Error | null, response?: Buffer) => void): void;
  };
  return {
    query: (sql, params) =>
      new Promise((resolve, reject) =>
        client.query(Buffer.from(JSON.stringify({ sql, params })), (e, r) => (e ? reject(e) : resolve(Number(r)))),
      ),
    close: () => client.close(),
  };
}

/** A running fan-out floor (`startFanOutFloor`). */
export interface FanOutFloor {
  readonly port: number;
  /** Streams open now. */
  streams(): number;
  /** Writes `bytes` (one encoded response) to every open stream, as is. */
  send(bytes: Uint8Array): void;
  stop(): Promise<void>;
}

/**
 * Starts the fan-out floor: a bare grpc-js server whose one server-streaming method, at the
 * service's own `path` (so the service's stock client reads it unchanged), keeps every stream
 * opened, writes `greeting` to it at once, and writes each `send` to all of them — encoded once
 * by the caller, no auth, no database, no per-stream bookkeeping. The physical limit of this
 * machine for fanning one event out to that many streams.
 */
export async function startFanOutFloor(path: string, greeting: readonly Uint8Array[]): Promise<FanOutFloor> {
  const open = new Set<grpc.ServerWritableStream<Buffer, Buffer>>();
  const server = new grpc.Server();
  const definition = {
    stream: { ...floorDefinition.query, path, responseStream: true },
  };
  server.addService(definition as unknown as grpc.ServiceDefinition, {
    stream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      open.add(call);
      call.on("cancelled", () => open.delete(call));
      for (const bytes of greeting) call.write(Buffer.from(bytes));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return {
    port,
    streams: () => open.size,
    send(bytes) {
      const buffer = Buffer.from(bytes);
      for (const call of open) call.write(buffer);
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const call of open) call.end();
        open.clear();
        server.tryShutdown(() => resolve());
      }),
  };
}

/**
 * Opens `url` as an SSE stream with a bearer `token` and hands each frame (the text up to a blank
 * line) to `onFrame`, until the stream ends or `signal` aborts (either resolves). The benchmarks'
 * reader of thousands of streams: no EventSource per stream, no reconnects.
 */
export async function readSseFrames(
  url: string,
  token: string,
  signal: AbortSignal,
  onFrame: (frame: string) => void,
): Promise<void> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal });
  if (!response.body) return;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      onFrame(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
    }
  }
}
