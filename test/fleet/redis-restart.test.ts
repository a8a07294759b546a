import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { Fleet } from "./harness/fleet";
import { activityClient, bearer } from "./harness/grpc";
import { GatewayRouter } from "./harness/http";
import { McpAgent } from "./harness/mcp";
import { poll } from "./harness/processes";
import { PrivateRedis, redisServerUnavailable } from "./harness/redis-server";
import { buildResult, type RunResult, summary } from "./harness/report";
import { Scenario } from "./harness/scenario";
import type { SequenceReport, StreamRecord } from "./harness/streams";
import { nonAlternating } from "./harness/truth";

/**
 * Redis restarted empty under load (issue 29, deliverable 2). The fleet (two gateways, two cube and
 * two presence replicas, one device) runs on a redis-server of the suite's own with no persistence
 * (`--save ""`), behind the harness's proxy. Under the mixed load of the chaos scenario (appends
 * over gRPC, Connect and MCP `log_post`, gRPC/SSE/MCP-push activity streams, machine links and
 * watchers), with one credential holding its ten streams (five SSE over both gateways, five gRPC
 * SubscribeActivity), the suite SIGKILLs the redis-server and starts a fresh, empty one on the same
 * port. Then:
 * - every acknowledged append is in the log, and every resumed stream delivered the log exactly
 *   once, in order (the bus lost its subscriptions: they must be made again and drained from the
 *   database);
 * - the fleet-wide stream count of that credential is right again within seconds: an eleventh
 *   stream is refused over SSE and gRPC (not "zero held" because Redis forgot), and closing one
 *   frees its place (not stuck);
 * - the MCP 2025-11-25 sessions (the stock SDK client, one initialized on A and continued on B)
 *   survive: their `Mcp-Session-Id` keeps working with its seat, `log_post`/`log_read` succeed
 *   after the restart, and their pushes delivered exactly once. (The stock client does not
 *   re-initialize on a 404 by itself, so a lost session would fail every later call.)
 */
const LIMIT = 10;
/** How long the fleet runs with no Redis at all between the kill and the fresh start. */
const GAP_MS = 2_000;
/** How soon after the fresh start the credential's stream count must be right again. */
const REBUILD_MS = 10_000;

/** An open SSE stream (200 and the first `ready` seen), or the refusal. */
interface Opened {
  readonly status: number;
  close(): void;
}

async function openSse(url: string, token: string): Promise<Opened> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  if (response.status !== 200) {
    await response.body?.cancel();
    return { status: response.status, close: () => {} };
  }
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("event: ready")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended before ready: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  return { status: 200, close: () => controller.abort() };
}

/** Waits for a gRPC server stream's first message (open: code 0) or its error (refused: the code). */
function firstOf(stream: AsyncIterable<unknown> & { cancel(): void }): Promise<{ code: number; close(): void }> {
  return (async () => {
    const iterator = stream[Symbol.asyncIterator]();
    try {
      await iterator.next();
      return { code: 0, close: () => stream.cancel() };
    } catch (error) {
      return { code: (error as { code: number }).code, close: () => {} };
    }
  })();
}

const unavailable = redisServerUnavailable();
if (unavailable) process.stderr.write(`\n[redis-restart] SKIPPED: ${unavailable}\n`);

(unavailable ? describe.skip : describe)("fleet: Redis restarted empty under load", () => {
  let redis: PrivateRedis;
  let fleet: Fleet;
  let scenario: Scenario;
  let result: RunResult;
  const stalls: string[] = [];
  const marks: Record<string, number> = {};
  /** The MCP sessions' ids before the restart and after it. */
  let sessionsBefore: (string | undefined)[] = [];
  let sessionsAfter: (string | undefined)[] = [];
  /** A stock SDK client's calls after the restart: tool name → ok or the error. */
  const afterCalls: string[] = [];
  /** The fresh server's channels and subscriber counts once the buses subscribed again. */
  let subscribed = new Map<string, number>();
  /** What the cap said after the restart. */
  const caps: Record<string, unknown> = {};
  /** Each attempt at an eleventh stream after the restart: when, and what SSE and gRPC answered. */
  const probes: string[] = [];

  const progress = async (entries: number, links: number, what: string) => {
    try {
      await scenario.progress(entries, links, what, 30_000);
      fleet.note(`progress: ${what}`);
    } catch (error) {
      stalls.push((error as Error).message);
      fleet.note(`STALL: ${(error as Error).message}`);
    }
  };

  beforeAll(async () => {
    redis = await PrivateRedis.create();
    fleet = await Fleet.start({
      label: "redisrestart",
      targets: "balanced",
      redisPort: redis.port,
      env: {
        presence: {
          PRESENCE_LINK_HEARTBEAT_MS: "1000",
          PRESENCE_LINK_LEASE_MS: "3000",
          PRESENCE_RECONCILE_MS: "1000",
        },
      },
    });
    scenario = await Scenario.start(fleet, "cross", 9);
    const { world } = scenario;
    const capToken = world.clients[8]!.token;
    const gateways = fleet.gatewayUrls();
    const sseUrl = (i: number) => `${gateways[i % 2]}/v1/cubes/${world.cubeId}/events?after=`;
    const activity = activityClient(Fleet.target(fleet.cube));
    const held: { close(): void }[] = [];
    try {
      await activity.appendEntry(
        { cubeId: world.cubeId, message: "before the cap streams", visibility: Visibility.BROADCAST },
        bearer(world.clients[0]!.token, { deadline: Date.now() + 10_000 }),
      );
      for (let i = 0; i < LIMIT / 2; i++) {
        const sse = await openSse(sseUrl(i), capToken);
        if (sse.status !== 200) throw new Error(`cap stream ${i} over SSE refused before the restart: ${sse.status}`);
        held.push(sse);
        const grpc = await firstOf(activity.subscribeActivity({ cubeId: world.cubeId, after: "" }, bearer(capToken)));
        if (grpc.code !== 0) throw new Error(`cap stream ${i} over gRPC refused before the restart: ${grpc.code}`);
        held.push(grpc);
      }
      caps.refusedBefore = (await openSse(sseUrl(0), capToken)).status;
      await progress(40, 8, "warm-up");
      sessionsBefore = scenario.agents.map((a) => a.sessionId);

      marks.kill = Date.now();
      await redis.kill();
      fleet.note(`redis-server SIGKILLed (port ${redis.port})`);
      await new Promise((resolve) => setTimeout(resolve, GAP_MS));
      await redis.start();
      marks.started = Date.now();
      fleet.note("a fresh, empty redis-server started on the same port");

      // The credential still holds ten streams: the fleet must count them again, soon.
      const refusedAgain = async () => {
        const sse = await openSse(sseUrl(1), capToken);
        sse.close();
        const grpc = await firstOf(activity.subscribeActivity({ cubeId: world.cubeId, after: "" }, bearer(capToken)));
        grpc.close();
        probes.push(`+${Date.now() - marks.started!}ms sse ${sse.status} grpc ${grpc.code}`);
        return sse.status === 429 && grpc.code === 8;
      };
      await poll(
        refusedAgain,
        "the eleventh stream to be refused again (SSE 429 and gRPC RESOURCE_EXHAUSTED)",
        REBUILD_MS,
        250,
      )
        .then(() => {
          caps.refusedAfterMs = Date.now() - marks.started!;
        })
        .catch((error: Error) => {
          caps.refusedAfter = error.message;
        });
      await progress(40, 8, "after the restart");
      // The empty server knows no subscription: the buses must have made theirs again.
      const channel = (name: string) => `${fleet.busPrefix}:${name}`;
      await poll(
        async () => {
          subscribed = await redis.subscriptions(`${fleet.busPrefix}:*`);
          return [channel(`cube:${world.cubeId}`), channel(`presence:${world.tenantId}`), channel("auth")].every(
            (c) => (subscribed.get(c) ?? 0) > 0,
          );
        },
        "the buses to subscribe again on the fresh server",
        REBUILD_MS,
        250,
      ).catch((error: Error) => stalls.push(error.message));
      // Closing one frees its place (over SSE and gRPC alike: one place, so one of them at a time).
      held.shift()!.close();
      await poll(
        async () => {
          const again = await openSse(sseUrl(0), capToken);
          if (again.status === 200) held.push(again);
          return again.status === 200;
        },
        "a freed place to be usable",
        REBUILD_MS,
        250,
      )
        .then(() => {
          caps.freed = "usable";
        })
        .catch((error: Error) => {
          caps.freed = error.message;
        });

      // The stock SDK clients carry on with their sessions: read, post, and their later calls succeed.
      sessionsAfter = scenario.agents.map((a) => a.sessionId);
      for (const agent of scenario.agents) {
        for (const [tool, args] of [
          ["log_read", {}],
          ["log_post", { message: `${agent.record.name} after the restart` }],
        ] as const) {
          const answer = await agent.tool(tool, args).then(
            (r) => (r.isError ? `tool error: ${r.content[0]?.text}` : "ok"),
            (error: Error) => `failed: ${error.message}`,
          );
          afterCalls.push(`${agent.record.name} ${tool}: ${answer}`);
        }
      }
      // A new stock client opens a session on the restarted Redis and attaches (the store works again).
      const fresh = await McpAgent.open(
        new GatewayRouter(() => fleet.gatewayUrls(), fleet.ledger, "mcp-fresh", 1),
        world.clients[3]!.token,
        fleet.ledger,
        "mcp-fresh",
      );
      try {
        await fresh.attach(world.cubeId, world.roleId);
        const read = await fresh.tool("log_read", {});
        afterCalls.push(`mcp-fresh log_read: ${read.isError ? `tool error: ${read.content[0]?.text}` : "ok"}`);
      } finally {
        await fresh.close();
      }
      await progress(30, 4, "after the MCP checks");
    } finally {
      for (const stream of held.splice(0)) stream.close();
      activity.close();
    }
    await scenario.stopLoad();
    result = buildResult(scenario, await scenario.settle());
    process.stdout.write(
      `\n${result.lines.join("\n")}\nstalls: ${stalls.length ? stalls.join("; ") : "none"}\ncaps: ${JSON.stringify(caps)}; eleventh-stream probes: ${probes.join(", ")}\n` +
        `subscribed on the fresh server: ${[...subscribed].map(([c, n]) => `${c.slice(fleet.busPrefix.length + 1)} x${n}`).join(", ")}\n` +
        `mcp sessions before ${JSON.stringify(sessionsBefore)} after ${JSON.stringify(sessionsAfter)}\n${afterCalls.join("\n")}\n`,
    );
  }, 300_000);

  afterAll(async () => {
    await scenario?.close();
    await fleet?.stop();
    await redis?.stop();
  }, 60_000);

  const exact = (reports: SequenceReport[]) => Object.fromEntries(reports.map((r) => [r.name, "exact"]));
  const of = (surface: string, reports: SequenceReport[], records: StreamRecord[]) =>
    reports.filter((_, i) => records[i]!.surface === surface);

  it("the buses subscribed again on the fresh server (cube, presence and credential channels)", () => {
    expect([...subscribed.keys()].map((c) => c.slice(fleet.busPrefix.length + 1))).toEqual(
      expect.arrayContaining([`cube:${scenario.world.cubeId}`, `presence:${scenario.world.tenantId}`, "auth"]),
    );
  });

  it("committed every acknowledged append and kept the load going through the restart", () => {
    expect(redis.starts).toBe(2);
    expect(result.ackedMissingFromLog).toEqual([]);
    expect(stalls).toEqual([]);
  });

  it("every activity stream (gRPC, SSE on both gateways, MCP pushes) delivered the log exactly once, in order", () => {
    expect(summary(result.activity)).toEqual(exact(result.activity));
    const sse = scenario.activity.filter((r) => r.surface === "sse");
    expect(sse.map((r) => [r.name, r.errorEvents])).toEqual(sse.map((r) => [r.name, []]));
  });

  it("every machines stream (gRPC, SSE) delivered every transition exactly once, in order", () => {
    expect(result.transitions.length).toBeGreaterThan(0);
    expect(summary(of("grpc", result.presence, scenario.presence))).toEqual(
      exact(of("grpc", result.presence, scenario.presence)),
    );
    expect(summary(of("sse", result.presence, scenario.presence))).toEqual(
      exact(of("sse", result.presence, scenario.presence)),
    );
    expect(nonAlternating(result.transitions)).toEqual([]);
  });

  it("a credential's stream count is rebuilt: the eleventh is refused again within seconds, and closing one frees it", () => {
    expect(caps.refusedBefore).toBe(429);
    expect(caps.refusedAfter).toBeUndefined();
    expect(caps.refusedAfterMs).toBeLessThan(REBUILD_MS);
    expect(caps.freed).toBe("usable");
  });

  it("MCP 2025-11-25 sessions survive: the same Mcp-Session-Id, and the stock client's later calls succeed", () => {
    expect(sessionsAfter).toEqual(sessionsBefore);
    expect(afterCalls.filter((c) => !c.endsWith(": ok"))).toEqual([]);
    expect(afterCalls).toHaveLength(2 * scenario.agents.length + 1);
  });

  it("no request failed", () => {
    expect(fleet.ledger.describe(fleet.ledger.unexcused(), fleet.startedAt)).toEqual([]);
  });
});
