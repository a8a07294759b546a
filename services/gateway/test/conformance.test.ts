import { spawn } from "node:child_process";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { type System, seedTenant, startSystem } from "./system";

/** The official MCP conformance suite's command line (pinned in the root package.json). */
const SUITE = require.resolve("@modelcontextprotocol/conformance/dist/index.js");

/**
 * A pass-through to the gateway that adds the bearer: the suite has no option for an
 * Authorization header, and every `/mcp` request needs one.
 */
function bearerProxy(target: string, token: string): Promise<Server> {
  const upstream = new URL(target);
  const server = createServer((incoming, outgoing) => {
    const headers = { ...incoming.headers, authorization: `Bearer ${token}` };
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, path: incoming.url, method: incoming.method, headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forward.on("error", () => outgoing.destroy());
    outgoing.on("close", () => forward.destroy());
    incoming.pipe(forward);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** Runs the suite's scenarios required by `revision` against `url`, judged against the committed baseline. */
function runSuite(url: string, revision: string): Promise<{ code: number | null; output: string }> {
  const baseline = join(__dirname, "conformance", `expected-failures-${revision}.yaml`);
  const args = [SUITE, "server", "--url", url, "--requirements", revision, "--expected-failures", baseline];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

/** The suite's `Total: N passed, M failed` line. */
const totals = (output: string) => /Total: (\d+) passed, (\d+) failed/.exec(output)?.slice(1).map(Number);

describe("gateway: the official MCP conformance suite, both revisions on /mcp", () => {
  let system: System;
  let proxy: Server;

  beforeAll(async () => {
    // The suite opens a session per 2025-11-25 scenario and calls quickly: room for both.
    system = await startSystem("gw_conformance", {
      mcpMaxSessions: 500,
      rateLimitPerSecond: 1000,
      rateLimitBurst: 1000,
    });
    const acme = await seedTenant(system, "acme", 1);
    proxy = await bearerProxy(system.url, acme.clients[0]!.token);
  }, 120_000);
  afterAll(async () => {
    await new Promise((resolve) => proxy.close(resolve));
    await system.stop();
  });

  it("runs on Node 24 or newer (the suite needs 22+, the image runs 24)", () => {
    expect(Number(process.versions.node.split(".")[0])).toBeGreaterThanOrEqual(24);
  });

  it.each(["2026-07-28", "2025-11-25"])(
    "%s: every applicable scenario passes; only the committed expected failures fail",
    async (revision) => {
      const { port } = proxy.address() as AddressInfo;
      const { code, output } = await runSuite(`http://127.0.0.1:${port}/mcp`, revision);
      const counted = totals(output);
      if (code !== 0) throw new Error(`conformance ${revision} failed (exit ${code}):\n${output.slice(-6000)}`);
      expect(output).toContain("Baseline check passed");
      expect(counted?.[0]).toBeGreaterThan(0);
    },
    600_000,
  );
});
