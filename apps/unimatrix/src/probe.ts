#!/usr/bin/env node
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { createClient } from "@unimatrix/service-kit/grpc";

/** How long one target may take to answer, milliseconds (`--timeout-ms=N` changes it). */
const DEFAULT_TIMEOUT_MS = 5_000;

/** What probing one target found. */
export interface ProbeResult {
  readonly target: string;
  readonly ok: boolean;
  readonly detail: string;
}

/**
 * Asks `grpc://host:port[/service]` for `grpc.health.v1.Health/Check` (healthy only when
 * SERVING), or GETs an `http(s)://` URL (healthy only on 200).
 */
export async function probe(target: string, timeoutMs: number): Promise<ProbeResult> {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return { target, ok: false, detail: "not a URL (grpc://host:port, http://host:port/path)" };
  }
  try {
    if (url.protocol === "grpc:") {
      const client = createClient(Health, url.host);
      try {
        const service = decodeURIComponent(url.pathname.replace(/^\//, ""));
        const { status } = await client.check({ service }, { deadline: timeoutMs });
        return {
          target,
          ok: status === HealthCheckResponse_ServingStatus.SERVING,
          detail: HealthCheckResponse_ServingStatus[status] ?? String(status),
        };
      } finally {
        client.close();
      }
    }
    if (url.protocol === "http:" || url.protocol === "https:") {
      const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: "manual" });
      await response.body?.cancel();
      return { target, ok: response.status === 200, detail: `HTTP ${response.status}` };
    }
    return { target, ok: false, detail: `unsupported scheme ${url.protocol} (use grpc:, http: or https:)` };
  } catch (error) {
    return { target, ok: false, detail: (error as Error).message };
  }
}

/**
 * `probe [--timeout-ms=N] <target>...`: the health check for runtimes without native gRPC probes
 * (Docker `--health-cmd`, `helm test`, systemd). Prints one line per target; exits 0 only when
 * every target is healthy, 1 otherwise, 2 on bad usage.
 */
async function main(): Promise<number> {
  let timeoutMs = DEFAULT_TIMEOUT_MS;
  const targets: string[] = [];
  for (const arg of process.argv.slice(2)) {
    const timeout = /^--timeout-ms=(\d+)$/.exec(arg);
    if (timeout) timeoutMs = Number(timeout[1]);
    else targets.push(arg);
  }
  if (targets.length === 0 || timeoutMs <= 0) {
    process.stderr.write("usage: probe [--timeout-ms=N] grpc://host:port[/service] | http(s)://host:port/path ...\n");
    return 2;
  }
  const results = await Promise.all(targets.map((target) => probe(target, timeoutMs)));
  for (const result of results) {
    (result.ok ? process.stdout : process.stderr).write(
      `${result.ok ? "ok" : "FAIL"} ${result.target} ${result.detail}\n`,
    );
  }
  return results.every((result) => result.ok) ? 0 : 1;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack}\n`);
      process.exit(1);
    },
  );
}
