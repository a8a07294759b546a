import { status as grpcStatus } from "@grpc/grpc-js";
import type { KillRecord } from "./processes";

/** One request the load made and how it ended. */
export interface RequestRecord {
  /** What kind of request, e.g. `connect AppendEntry`, `sse open`, `grpc AppendEntry`, `mcp log_post`. */
  readonly surface: string;
  /** Where it went (gateway URL, `cube`, `presence`). */
  readonly via: string;
  readonly startedAt: number;
  readonly endedAt: number;
  /** `200`, `503`, `grpc UNAVAILABLE`, `network ECONNRESET`, `tool UNAVAILABLE: …`. */
  readonly outcome: string;
  /** Whether it succeeded. */
  readonly ok: boolean;
  /** Whether it failed the way a dying process fails (5xx, UNAVAILABLE/INTERNAL/UNKNOWN, reset). */
  readonly serverSide: boolean;
  /** Only a kill of one of these processes excuses it (streams: the process it was connected to); unset: any kill. */
  readonly excusedBy?: readonly string[];
}

/** gRPC codes a Connect client sees as 5xx (and a dying upstream produces). */
const SERVER_SIDE_CODES = new Set([
  grpcStatus.UNKNOWN,
  grpcStatus.DEADLINE_EXCEEDED,
  grpcStatus.UNIMPLEMENTED,
  grpcStatus.INTERNAL,
  grpcStatus.UNAVAILABLE,
  grpcStatus.DATA_LOSS,
]);

/** Whether a gRPC code counts as a server-side failure. */
function isServerSideCode(code: number): boolean {
  return SERVER_SIDE_CODES.has(code);
}

/** The name of a gRPC code. */
function codeName(code: number): string {
  return grpcStatus[code] ?? String(code);
}

/**
 * Everything the load did: each request's outcome with timing, and each SIGKILL. A failed request
 * is excused only when a process was being killed while it was in flight (started before the
 * process was gone, ended after the signal was sent).
 */
export class Ledger {
  readonly requests: RequestRecord[] = [];
  readonly kills: KillRecord[] = [];

  /** Records one request. */
  record(entry: Omit<RequestRecord, "endedAt"> & { endedAt?: number }): void {
    this.requests.push({ ...entry, endedAt: entry.endedAt ?? Date.now() });
  }

  /** Records a gRPC call's outcome from its error (undefined: success). */
  recordGrpc(surface: string, via: string, startedAt: number, error?: unknown, excusedBy?: readonly string[]): void {
    if (error === undefined) {
      this.record({ surface, via, startedAt, outcome: "OK", ok: true, serverSide: false });
      return;
    }
    const code = (error as { code?: unknown }).code;
    const known = typeof code === "number";
    this.record({
      surface,
      via,
      startedAt,
      outcome: known ? `grpc ${codeName(code)}: ${(error as { details?: string }).details ?? ""}` : String(error),
      ok: false,
      serverSide: known ? isServerSideCode(code) : true,
      ...(excusedBy ? { excusedBy } : {}),
    });
  }

  /** The kill (if any) whose window overlaps a request. */
  excuseOf(request: RequestRecord): KillRecord | undefined {
    return this.kills.find(
      (k) =>
        request.startedAt <= k.exitedAt &&
        request.endedAt >= k.signalledAt &&
        (request.excusedBy === undefined || request.excusedBy.includes(k.name)),
    );
  }

  /** Failed requests with no kill in flight to explain them: should be none. */
  unexcused(): RequestRecord[] {
    return this.requests.filter((r) => !r.ok && !(r.serverSide && this.excuseOf(r)));
  }

  /** Failed requests explained by a kill in flight (reported with their timing). */
  excused(): RequestRecord[] {
    return this.requests.filter((r) => !r.ok && r.serverSide && this.excuseOf(r));
  }

  /** Requests per surface: total and failed. */
  counts(): Record<string, { total: number; failed: number }> {
    const out: Record<string, { total: number; failed: number }> = {};
    for (const r of this.requests) {
      const c = out[r.surface] ?? { total: 0, failed: 0 };
      out[r.surface] = c;
      c.total += 1;
      if (!r.ok) c.failed += 1;
    }
    return out;
  }

  /**
   * A readable line per kind of failure (surface, target, outcome, excuse), relative to `t0`:
   * how many, and from when to when.
   */
  describe(records: readonly RequestRecord[], t0: number): string[] {
    const groups = new Map<string, { count: number; from: number; to: number }>();
    for (const r of records) {
      const kill = this.excuseOf(r);
      const key = `${r.surface} via ${r.via}: ${r.outcome}${kill ? ` (in flight while ${kill.name} was killed)` : ""}`;
      const group = groups.get(key) ?? { count: 0, from: r.startedAt, to: r.endedAt };
      group.count += 1;
      group.to = Math.max(group.to, r.endedAt);
      groups.set(key, group);
    }
    const at = (ms: number) => `+${((ms - t0) / 1000).toFixed(2)}s`;
    return [...groups].map(([key, g]) => `${g.count}x ${at(g.from)}..${at(g.to)} ${key}`);
  }
}
