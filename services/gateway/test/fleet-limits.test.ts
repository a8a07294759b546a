import { TEST_REDIS_URL, testBusPrefix } from "@unimatrix/service-kit/testing";
import { parseCidrs } from "../src/client-address";
import { LeaseTable } from "../src/fleet/leases";
import { SharedStore } from "../src/fleet/shared";
import { StreamCaps } from "../src/fleet/streams";
import { addGateway, call, connectJson, type System, seedTenant, startSystem } from "./system";

type Gateway = Awaited<ReturnType<typeof addGateway>>;

/** Opens an SSE stream with fetch; resolves with its status once the headers are in. */
async function openStream(url: string, token: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const response = await fetch(url, {
    headers: { authorization: `Bearer ${token}`, accept: "text/event-stream", ...headers },
    signal: controller.signal,
  });
  const body = response.status === 200 ? undefined : await response.json();
  return { status: response.status, body, close: () => controller.abort() };
}

/** A clock tests move by hand. */
function manualClock(start = Date.now()) {
  let now = start;
  return {
    now: () => new Date(now),
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe("gateway: limits across replicas", () => {
  let system: System;
  let b: Gateway;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let reader: string;

  beforeAll(async () => {
    system = await startSystem("gw_fleet_limits");
    b = await addGateway(system);
    acme = await seedTenant(system, "acme", 1);
    reader = (
      await call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: acme.cubeId, roleId: acme.roleId },
        acme.clients[0]!.token,
      )
    ).sessionToken;
  }, 120_000);
  afterAll(async () => {
    await b?.stop();
    await system?.stop();
  });

  it("refuses the eleventh SSE stream of one credential spread over two gateways with 429, and frees a closed slot", async () => {
    const path = `/v1/cubes/${acme.cubeId}/events`;
    const open: Awaited<ReturnType<typeof openStream>>[] = [];
    try {
      for (let i = 0; i < 10; i++) {
        const stream = await openStream(`${i % 2 === 0 ? system.url : b.url}${path}`, reader);
        expect(stream.status).toBe(200);
        open.push(stream);
      }
      for (const url of [system.url, b.url]) {
        const eleventh = await openStream(`${url}${path}`, reader);
        expect(eleventh.status).toBe(429);
        expect(eleventh.body).toMatchObject({ code: "resource_exhausted" });
        expect(String((eleventh.body as { message: string }).message)).toMatch(/10 open streams across the gateways/);
      }
      open.shift()!.close(); // one closed on gateway A…
      let again: Awaited<ReturnType<typeof openStream>> | undefined;
      const until = Date.now() + 5_000;
      while (Date.now() < until) {
        again = await openStream(`${b.url}${path}`, reader); // …lets gateway B open one
        if (again.status === 200) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(again?.status).toBe(200);
      open.push(again!);
    } finally {
      for (const stream of open) stream.close();
    }
  });

  it("counts MCP push streams against the credential's stream cap with its SSE streams, and bounds them per session", async () => {
    const token = acme.clients[0]!.token;
    const session = async (url: string) => {
      const response = await fetch(`${url}/mcp`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "1" } },
        }),
      });
      expect(response.status).toBe(200);
      await response.text();
      return response.headers.get("mcp-session-id")!;
    };
    const openPush = (url: string, sessionId: string) =>
      openStream(`${url}/mcp`, token, { "mcp-session-id": sessionId });
    const open: Awaited<ReturnType<typeof openStream>>[] = [];
    try {
      const sessions: string[] = [];
      for (let i = 0; i < 6; i++) sessions.push(await session(i % 2 === 0 ? system.url : b.url));
      // Two push streams per session, on either gateway; a third on the same session is refused.
      for (const [i, id] of sessions.slice(0, 5).entries()) {
        for (const url of [system.url, b.url]) {
          const stream = await openPush(url, id);
          expect(stream.status).toBe(200);
          open.push(stream);
        }
        if (i === 0) {
          const third = await openPush(system.url, id);
          expect(third.status).toBe(429);
          expect(JSON.stringify(third.body)).toMatch(/session already holds 2 push streams/);
        }
      }
      // Ten open: the credential's cap is spent for pushes of any session and for its SSE streams.
      for (const url of [system.url, b.url]) {
        const eleventh = await openPush(url, sessions[5]!);
        expect(eleventh.status).toBe(429);
        expect(JSON.stringify(eleventh.body)).toMatch(/10 open streams across the gateways/);
        const sse = await openStream(`${url}/v1/cubes/${acme.cubeId}/events`, token);
        expect(sse.status).toBe(429);
        expect(sse.body).toMatchObject({ code: "resource_exhausted" });
      }
      open.shift()!.close(); // a closed push frees its slot for an SSE stream
      let again: Awaited<ReturnType<typeof openStream>> | undefined;
      const until = Date.now() + 5_000;
      while (Date.now() < until) {
        again = await openStream(`${b.url}/v1/cubes/${acme.cubeId}/events`, token);
        if (again.status === 200) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(again?.status).toBe(200);
      open.push(again!);
    } finally {
      for (const stream of open) stream.close();
    }
  });

  it("lets the slots of a gateway that died (never released, never renewed) lapse after their lease", async () => {
    const clock = manualClock();
    const store = new SharedStore({ url: TEST_REDIS_URL, prefix: testBusPrefix("gw_leases") });
    try {
      await eventuallyReady(store);
      const dead = new LeaseTable(store, "streams", clock);
      for (let i = 0; i < 10; i++) expect(await dead.acquire("cred", `dead-${i}`, 10, 15_000)).toBe(true);
      const live = new StreamCaps(new LeaseTable(store, "streams", clock), 10, 15_000);
      expect(await live.open("cred")).toBeUndefined();
      expect(await live.count("cred")).toBe(10);
      clock.advance(14_000);
      expect(await live.open("cred")).toBeUndefined();
      clock.advance(1_001);
      const slot = await live.open("cred");
      expect(slot).toBeDefined();
      expect(await live.count("cred")).toBe(1);
      await slot!.release();
      expect(await live.count("cred")).toBe(0);
      expect(store.degraded).toBe(false);
    } finally {
      await store.close();
    }
  });

  it("counts a credential's rate limit across gateways", async () => {
    const config = { busPrefix: testBusPrefix("gw_fleet_rate") };
    const limited = { rateLimitPerSecond: 0.001, rateLimitBurst: 3 };
    const [c, d] = [await addGateway(system, limited, config), await addGateway(system, limited, config)];
    try {
      const statuses: number[] = [];
      for (const gateway of [c, d, c, d]) {
        statuses.push((await connectJson(gateway, "unimatrix.cube.v1.CubeService/ListCubes", {}, acme.user)).status);
      }
      expect(statuses).toEqual([200, 200, 200, 429]);
    } finally {
      await Promise.all([c.stop(), d.stop()]);
    }
  });

  it("believes X-Forwarded-For only from a trusted proxy", async () => {
    const limited = { rateLimitPerSecond: 0.001, rateLimitBurst: 2 };
    const trusting = await addGateway(
      system,
      { ...limited, trustedProxies: parseCidrs("127.0.0.0/8, ::1/128") },
      { busPrefix: testBusPrefix("gw_xff_trust") },
    );
    const plain = await addGateway(system, limited, { busPrefix: testBusPrefix("gw_xff_plain") });
    // Unknown tokens are charged to the client address (the per-address lookup limit).
    const flood = async (gateway: Gateway, forwardedFor: string, n: number) => {
      const statuses: number[] = [];
      for (let i = 0; i < n; i++) {
        const token = `umx_client_xff${i}${forwardedFor.replaceAll(".", "")}_secret${i}`;
        const headers = { "x-forwarded-for": `198.51.100.9, ${forwardedFor}` };
        statuses.push(
          (await connectJson(gateway, "unimatrix.cube.v1.CubeService/ListCubes", {}, token, headers)).status,
        );
      }
      return statuses;
    };
    try {
      expect(await flood(trusting, "203.0.113.5", 3)).toEqual([401, 401, 429]);
      expect(await flood(trusting, "203.0.113.6", 1)).toEqual([401]); // another client behind the same proxy
      expect(await flood(plain, "203.0.113.7", 3)).toEqual([401, 401, 429]);
      expect(await flood(plain, "203.0.113.8", 1)).toEqual([429]); // the header is not believed: same socket
    } finally {
      await Promise.all([trusting.stop(), plain.stop()]);
    }
  });

  it("garbage tokens from one address never lock out a valid token of another tenant there; guesses at one lookup are limited", async () => {
    const gateway = await addGateway(
      system,
      { rateLimitPerSecond: 0.001, rateLimitBurst: 3 },
      { busPrefix: testBusPrefix("gw_lookup_limit") },
    );
    const globex = await seedTenant(system, "globex", 0);
    const listCubes = (token: string) => connectJson(gateway, "unimatrix.cube.v1.CubeService/ListCubes", {}, token);
    try {
      // Guesses at one lookup part: three are looked up (and refused), the fourth is not.
      const guesses: { status: number; body: Record<string, unknown> }[] = [];
      for (let i = 0; i < 4; i++) guesses.push(await listCubes(`umx_user_guessedlookup_wrongsecret${i}`));
      expect(guesses.map((g) => g.status)).toEqual([401, 401, 401, 429]);
      expect(guesses[3]!.body).toMatchObject({ code: "resource_exhausted" });
      expect(String(guesses[3]!.body.message)).toMatch(/attempts with this credential/);
      // 40 made-up tokens from the same address: past the address's budget of failures they answer 429…
      const flood: number[] = [];
      for (let i = 0; i < 40; i++) flood.push((await listCubes(`umx_user_madeup${i}_secret${i}`)).status);
      expect(flood.filter((s) => s === 401).length + flood.filter((s) => s === 429).length).toBe(40);
      expect(flood.at(-1)).toBe(429);
      // …and a valid token of another tenant at that address still gets in (it was never in this gateway's cache).
      const valid = await listCubes(globex.user);
      expect(valid.status).toBe(200);
      expect(valid.body).toHaveProperty("cubes");
    } finally {
      await gateway.stop();
    }
  });

  it("starts and serves with Redis unreachable, counting per replica and saying so in a metric", async () => {
    const gateway = await addGateway(
      system,
      { rateLimitPerSecond: 0.001, rateLimitBurst: 2 },
      { redisUrl: "redis://127.0.0.1:1" },
    );
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        statuses.push((await connectJson(gateway, "unimatrix.cube.v1.CubeService/ListCubes", {}, acme.user)).status);
      }
      expect(statuses).toEqual([200, 200, 429]);
      const metrics = await (await fetch(gateway.metricsUrl)).text();
      expect(metrics).toMatch(/^unimatrix_gateway_fleet_degraded 1$/m);
      expect(metrics).toMatch(/^unimatrix_gateway_rate_limit_fallbacks_total 4$/m);
      const stream = await openStream(`${gateway.url}/v1/cubes/${acme.cubeId}/events`, reader);
      expect(stream.status).toBe(200); // the stream cap counts on this replica meanwhile
      stream.close();
    } finally {
      await gateway.stop();
    }
  });
});

async function eventuallyReady(store: SharedStore): Promise<void> {
  const until = Date.now() + 5_000;
  while (store.redis?.status !== "ready") {
    if (Date.now() > until) throw new Error("redis not ready");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
