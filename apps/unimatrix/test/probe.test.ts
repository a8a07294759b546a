// The probe command for runtimes without native gRPC probes (Docker --health-cmd, helm test): the
// compiled `probe.js` run as a process against a real gRPC host and a real HTTP server.
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { GrpcHost } from "@unimatrix/service-kit/grpc";
import { createLogger } from "@unimatrix/service-kit/logger";

const probe = join(__dirname, "..", "dist", "probe.js");
const exec = promisify(execFile);

/** Runs the compiled probe; resolves with its exit code and output. */
async function run(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [probe, ...args]);
    return { code: 0, out: stdout + stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, out: failed.stdout + failed.stderr };
  }
}

describe("probe", () => {
  let host: GrpcHost;
  let grpcPort: number;
  let http: Server;
  let httpPort: number;
  let closedPort: number;

  beforeAll(async () => {
    host = new GrpcHost({ logger: createLogger("probe-test", "silent") });
    grpcPort = await host.listen("127.0.0.1", 0);
    http = createServer((request, response) => response.writeHead(request.url === "/readyz" ? 200 : 503).end());
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    httpPort = (http.address() as AddressInfo).port;
    // A port that was just free and is closed now: nothing listens there.
    const spare = createServer();
    await new Promise<void>((resolve) => spare.listen(0, "127.0.0.1", resolve));
    closedPort = (spare.address() as AddressInfo).port;
    await new Promise<void>((resolve) => spare.close(() => resolve()));
  });
  afterAll(async () => {
    await host.shutdown(0);
    await new Promise<void>((resolve) => http.close(() => resolve()));
  });

  it("exits 0 when every target is healthy (gRPC SERVING, HTTP 200)", async () => {
    const result = await run(`grpc://127.0.0.1:${grpcPort}`, `http://127.0.0.1:${httpPort}/readyz`);
    expect(result).toEqual({
      code: 0,
      out: `ok grpc://127.0.0.1:${grpcPort} SERVING\nok http://127.0.0.1:${httpPort}/readyz HTTP 200\n`,
    });
  });

  it("exits 1 when a port is closed, even if the other targets are healthy", async () => {
    const result = await run("--timeout-ms=2000", `grpc://127.0.0.1:${grpcPort}`, `grpc://127.0.0.1:${closedPort}`);
    expect(result.code).toBe(1);
    expect(result.out).toContain(`FAIL grpc://127.0.0.1:${closedPort}`);
  });

  it("exits 1 on a service that is not SERVING and on an HTTP status other than 200", async () => {
    host.health.set("", "NOT_SERVING");
    try {
      const grpc = await run(`grpc://127.0.0.1:${grpcPort}`);
      expect(grpc).toEqual({ code: 1, out: `FAIL grpc://127.0.0.1:${grpcPort} NOT_SERVING\n` });
    } finally {
      host.health.set("", "SERVING");
    }
    const http503 = await run(`http://127.0.0.1:${httpPort}/other`);
    expect(http503).toEqual({ code: 1, out: `FAIL http://127.0.0.1:${httpPort}/other HTTP 503\n` });
  });

  it("exits 2 without targets", async () => {
    expect((await run()).code).toBe(2);
  });
});
