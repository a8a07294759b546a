import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { startCube } from "@unimatrix/cube";
import { silentLogger } from "@unimatrix/service-kit/logger";
import type { RunningService } from "@unimatrix/service-kit/service";
import { eventually } from "@unimatrix/service-kit/testing";
import { EventSource } from "eventsource";
import { entryMessage } from "./pushed";
import { addGateway, call, freePort, type System, seedTenant, startSystem } from "./system";

interface Received {
  readonly type: string;
  readonly id: string;
  readonly message?: string;
}

/** A browser-like EventSource on a cube's events with a bearer token. */
function listen(url: string, token: string) {
  const received: Received[] = [];
  const source = new EventSource(url, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` },
      }),
  });
  const errors: string[] = [];
  for (const type of ["entry", "ready", "error", "closed"]) {
    source.addEventListener(type, (event) => {
      const data = "data" in event && event.data ? (JSON.parse(event.data as string) as { message?: string }) : {};
      received.push({ type, id: (event as MessageEvent).lastEventId, message: data.message });
    });
  }
  source.onerror = (event) => errors.push(String((event as { message?: string }).message ?? "error"));
  const entries = () => received.filter((r) => r.type === "entry");
  return { source, received, entries, errors };
}

describe("gateway: SSE fails over between service replicas", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let writer: string;
  let reader: string;
  const replicas: RunningService[] = [];
  const replica = (port: number) =>
    startCube({ config: system.config, port, schema: system.cubeSchema, logger: silentLogger() }).then((cube) => {
      replicas.push(cube);
      return cube;
    });

  beforeAll(async () => {
    system = await startSystem("gw_failover");
    acme = await seedTenant(system, "acme", 2);
    const attach = (token: string) =>
      call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: acme.cubeId, roleId: acme.roleId },
        token,
      );
    writer = (await attach(acme.clients[0]!.token)).sessionToken;
    reader = (await attach(acme.clients[1]!.token)).sessionToken;
  }, 120_000);
  afterAll(async () => {
    for (const cube of replicas) await cube.stop().catch(() => {});
    await system?.stop();
  });

  /** Posts through the system's own gateway (its cube replica is never stopped). */
  const post = (message: string) =>
    call(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: acme.cubeId, message, visibility: "VISIBILITY_BROADCAST" },
      writer,
    );

  it("re-subscribes from the last cursor when the replica behind a stream stops: every entry exactly once", async () => {
    // Gateway G dials two cube replicas by an ipv4: list; only the first is up, so every stream
    // lands on it. The second comes up, then the first stops mid-stream.
    const first = await replica(0);
    const secondPort = await freePort();
    const gateway = await addGateway(system, {
      cubeAddress: `ipv4:127.0.0.1:${first.port},127.0.0.1:${secondPort}`,
    });
    const streams = [0, 1, 2].map(() => listen(`${gateway.url}/v1/cubes/${acme.cubeId}/events`, reader));
    try {
      await eventually(() => streams.every((s) => s.received.some((r) => r.type === "ready")), "streams ready");
      // The three read as one credential from the head: they share one upstream subscription.
      const shared = (await gateway.metrics.sharedUpstreams.get()).values;
      expect(shared.find((v) => v.labels.kind === "upstreams")?.value).toBe(1);
      expect(shared.find((v) => v.labels.kind === "members")?.value).toBe(streams.length);
      const sent: string[] = [];
      for (let i = 1; i <= 4; i++) {
        sent.push(`before ${i}`);
        await post(`before ${i}`);
      }
      await eventually(() => streams.every((s) => s.entries().length === 4), "the first entries");
      await replica(secondPort);
      await first.stop();
      for (let i = 1; i <= 4; i++) {
        sent.push(`after ${i}`);
        await post(`after ${i}`);
      }
      await eventually(
        () => streams.every((s) => s.entries().length >= 8),
        "the entries posted after the stop",
        15_000,
      );
      for (const stream of streams) {
        expect(stream.entries().map((e) => e.message)).toEqual(sent);
        expect(new Set(stream.entries().map((e) => e.id)).size).toBe(sent.length);
        // No break the browser could see: one ready, no error event, no reconnect of its own.
        expect(stream.received.filter((r) => r.type === "ready")).toHaveLength(1);
        expect(stream.received.filter((r) => r.type === "error" || r.type === "closed")).toEqual([]);
        expect(stream.errors).toEqual([]);
      }
      // The shared upstream was re-opened (at least once) for all three.
      const resumes = await gateway.metrics.upstreamResumes.get();
      expect(resumes.values.find((v) => v.labels.kind === "sse")?.value).toBeGreaterThanOrEqual(1);
    } finally {
      for (const stream of streams) stream.source.close();
      await gateway.stop();
    }
  }, 60_000);

  it("answers 200 and keeps trying upstream when the service is down at connect", async () => {
    const port = await freePort();
    const gateway = await addGateway(system, { cubeAddress: `127.0.0.1:${port}` });
    let status = 0;
    const stream = new EventSource(`${gateway.url}/v1/cubes/${acme.cubeId}/events`, {
      fetch: async (input, init) => {
        const response = await fetch(input, {
          ...init,
          headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${reader}` },
        });
        status = response.status;
        return response;
      },
    });
    const messages: string[] = [];
    let ready = false;
    stream.addEventListener("ready", () => {
      ready = true;
    });
    stream.addEventListener("entry", (event) => messages.push((JSON.parse(event.data) as { message: string }).message));
    const failures: unknown[] = [];
    stream.onerror = (event) => failures.push(event);
    try {
      await eventually(() => status !== 0, "the stream to be answered");
      expect(status).toBe(200);
      expect(ready).toBe(false);
      await replica(port); // the service comes back
      await eventually(() => ready, "the stream to reach the service once it is up", 15_000);
      await post("worth the wait");
      await eventually(() => messages.includes("worth the wait"), "the entry posted once the service is up");
      expect(messages).toEqual(["worth the wait"]);
      expect(failures).toEqual([]);
    } finally {
      stream.close();
      await gateway.stop();
    }
  }, 60_000);

  it("keeps an MCP push stream going when the cube replica behind it stops", async () => {
    const first = await replica(0);
    const secondPort = await freePort();
    const gateway = await addGateway(system, {
      cubeAddress: `ipv4:127.0.0.1:${first.port},127.0.0.1:${secondPort}`,
    });
    const agent = new Client({ name: "failover-agent", version: "1.0.0" });
    const pushed: string[] = [];
    agent.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
      const message = entryMessage(notification.params.data);
      if (message !== undefined) pushed.push(message);
    });
    const transport = new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${acme.clients[1]!.token}` } },
    });
    try {
      await agent.connect(transport);
      const seat = await agent.callTool({
        name: "seat_attach",
        arguments: { cube_id: acme.cubeId, role_id: acme.roleId },
      });
      expect(seat.isError).toBeFalsy();
      const sent: string[] = [];
      for (let i = 1; i <= 3; i++) {
        sent.push(`mcp before ${i}`);
        await post(`mcp before ${i}`);
      }
      await eventually(() => pushed.length === 3, "the first pushes");
      await replica(secondPort);
      await first.stop();
      for (let i = 1; i <= 3; i++) {
        sent.push(`mcp after ${i}`);
        await post(`mcp after ${i}`);
      }
      await eventually(() => pushed.length >= 6, "the pushes after the stop", 15_000);
      expect(pushed).toEqual(sent);
      const resumes = await gateway.metrics.upstreamResumes.get();
      expect(resumes.values.find((v) => v.labels.kind === "mcp")?.value).toBeGreaterThanOrEqual(1);
    } finally {
      await agent.close();
      await gateway.stop();
    }
  }, 60_000);
});
