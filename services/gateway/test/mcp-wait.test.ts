import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { eventually } from "@unimatrix/service-kit/testing";
import { addGateway, call, type System, seedTenant, startSystem, waitEventAfter, waitEvents } from "./system";

type Gateway = Awaited<ReturnType<typeof addGateway>>;

interface Result {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text: string }[];
}

/**
 * A host that ignores notifications and never opens the push stream (its GET /mcp is answered 405
 * by its own fetch, which the SDK takes as "no push stream"): it only calls tools and reads text.
 * With `sessionId` it joins that session on another gateway replica.
 */
async function pullOnlyHost(url: string, token: string, sessionId?: string) {
  const client = new Client({ name: "pull-only-host", version: "1.0.0" });
  let gets = 0;
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
    ...(sessionId ? { sessionId } : {}),
    fetch: (input, init) => {
      if ((init?.method ?? "GET") === "GET") {
        gets++;
        return Promise.resolve(new Response(null, { status: 405 }));
      }
      return fetch(input, init);
    },
  });
  await client.connect(transport);
  const tool = async (name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args }, undefined, { timeout: 70_000 })) as Result;
  const text = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await tool(name, args);
    if (result.isError) throw new Error(`${name}: ${result.content[0]?.text}`);
    return result.content[0]!.text;
  };
  return { client, tool, text, sessionId: transport.sessionId!, gets: () => gets, close: () => client.close() };
}

/** The messages of the entry lines of a read/wait text (`#n author → audience: message`). */
const messages = (text: string) => text.split("\n").flatMap((line) => /^#\d+ \S+ → [^:]+: (.*)$/.exec(line)?.[1] ?? []);

describe("gateway: MCP log_wait (the pull path)", () => {
  let system: System;
  let b: Gateway;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_mcp_wait");
    b = await addGateway(system);
    acme = await seedTenant(system, "acme", 3);
  }, 120_000);
  afterAll(async () => {
    await b?.stop();
    await system?.stop();
  });

  it("returns as soon as something arrives, says 'nothing new' when the time is up, and waits only for directs when asked", async () => {
    const waiter = await pullOnlyHost(system.url, acme.clients[0]!.token);
    const poster = await pullOnlyHost(system.url, acme.clients[1]!.token);
    try {
      await waiter.text("seat_attach", { cube_id: acme.cubeId });
      const posterSeat = await poster.tool("seat_attach", { cube_id: acme.cubeId });
      await waiter.text("log_read");

      expect(await waiter.text("log_wait", { timeout_s: 1 })).toBe("nothing new");

      const started = Date.now();
      const listening = await waitEvents(system.metricsUrl, "listening");
      const waiting = waiter.text("log_wait", { timeout_s: 40 });
      await waitEventAfter(system.metricsUrl, "listening", listening); // the wait follows the cube now
      await poster.text("log_post", { message: "wake up" });
      const woken = await waiting;
      expect(Date.now() - started).toBeLessThan(30_000);
      expect(woken.split("\n")[0]).toBe("1 unread");
      expect(messages(woken)).toEqual(["wake up"]);

      // only=direct: a broadcast does not end the wait; a direct one does, and the wait returns
      // everything unread (the broadcast too), so nothing is skipped.
      const me = (await waiter.tool("drones_list")).content[0]!.text.match(/^(\S+) \(you\)/m)![1]!;
      const passed = await waitEvents(system.metricsUrl, "passed");
      let settled = false;
      const direct = waiter.text("log_wait", { timeout_s: 40, only: "direct" }).finally(() => {
        settled = true;
      });
      await poster.text("log_post", { message: "chatter for everyone" });
      // The broadcast reached the wait and passed it by: the wait is still open.
      await waitEventAfter(system.metricsUrl, "passed", passed);
      expect(settled).toBe(false);
      await poster.text("log_post", { message: "just for you", recipients: [me] });
      const got = await direct;
      expect(got.split("\n")[0]).toBe("2 unread: 1 direct to you");
      expect(messages(got)).toEqual(["chatter for everyone", "just for you"]);
      expect(got).toMatch(/^#\d+ \S+ → you: just for you$/m);

      // A broadcast alone leaves a direct wait waiting until its time is up, and stays unread.
      await poster.text("log_post", { message: "more chatter" });
      expect(await waiter.text("log_wait", { timeout_s: 2, only: "direct" })).toBe("nothing new");
      expect(messages(await waiter.text("log_read"))).toEqual(["more chatter"]);
      expect(posterSeat.isError).toBeFalsy();
      expect(waiter.gets()).toBeGreaterThan(0); // the SDK did try to open the push stream
    } finally {
      await Promise.all([waiter.close(), poster.close()]);
    }
  }, 120_000);

  it("waits for a direct past a backlog of broadcasts on a fresh seat, leaving the backlog unread until then", async () => {
    const waiter = await pullOnlyHost(system.url, acme.clients[0]!.token);
    const poster = await pullOnlyHost(system.url, acme.clients[1]!.token);
    try {
      // A new seat whose inbox position this session has never learned (no read before the wait).
      const seat = await waiter.tool("seat_attach", { cube_id: acme.cubeId });
      const label = seat.structuredContent!.label as string;
      await poster.text("seat_attach", { cube_id: acme.cubeId });
      await poster.text("log_post", { message: "backlog one" });
      await poster.text("log_post", { message: "backlog two" });
      const listening = await waitEvents(system.metricsUrl, "listening");
      let settled = false;
      const waiting = waiter.text("log_wait", { timeout_s: 40, only: "direct" }).finally(() => {
        settled = true;
      });
      // The wait looked at the backlog, took nothing, and follows the cube now.
      await waitEventAfter(system.metricsUrl, "listening", listening);
      expect(settled).toBe(false);
      // A decision recorded meanwhile is counted on the woken wait's first line (the decisions are
      // read beside the inbox), and on a catch-up read's (read after it).
      await poster.text("decision_record", { title: "ship it" });
      await poster.text("log_post", { message: "finally for you", recipients: [label] });
      const woken = await waiting;
      expect(messages(woken).slice(-3)).toEqual(["backlog one", "backlog two", "finally for you"]);
      expect(woken.split("\n")[0]).toMatch(/: 1 direct to you.*; 1 new decision\(s\) \(decision_list\)$/);
      await poster.text("decision_record", { title: "and this" });
      await poster.text("log_post", { message: "after the second decision" });
      const read = await waiter.text("log_read");
      expect(messages(read)).toEqual(["after the second decision"]);
      // Counted from the oldest item's second: the first decision may share it.
      expect(read.split("\n")[0]).toMatch(/^1 unread; [12] new decision\(s\) \(decision_list\)$/);
    } finally {
      await Promise.all([waiter.close(), poster.close()]);
    }
  }, 120_000);

  it("never misses an entry: a host ignoring notifications, waiting on alternating gateway replicas, gets every post exactly once and in order", async () => {
    const token = acme.clients[2]!.token;
    const onA = await pullOnlyHost(system.url, token);
    const onB = await pullOnlyHost(b.url, token, onA.sessionId);
    const poster = await pullOnlyHost(b.url, acme.clients[1]!.token);
    const sent: string[] = [];
    const received: string[] = [];
    try {
      await onA.text("seat_attach", { cube_id: acme.cubeId });
      await poster.text("seat_attach", { cube_id: acme.cubeId });
      await onB.text("log_read", { page_size: 500 });
      // The poster posts 24 entries in bursts with pauses, through both replicas' sessions.
      const posting = (async () => {
        for (let i = 1; i <= 24; i++) {
          const message = `entry ${i}`;
          sent.push(message);
          await poster.text("log_post", { message });
          if (i % 3 === 0) await new Promise((resolve) => setTimeout(resolve, 150 + ((i * 37) % 400)));
        }
      })();
      let round = 0;
      const deadline = Date.now() + 90_000;
      while (received.length < 24 && Date.now() < deadline) {
        const host = round++ % 2 === 0 ? onA : onB;
        received.push(...messages(await host.text("log_wait", { timeout_s: 5 })));
      }
      await posting;
      expect(received).toEqual(sent);
      // Nothing left behind: the inbox is empty now.
      expect(await onA.text("log_read")).toBe("0 unread");
      expect(round).toBeGreaterThan(1);
    } finally {
      await Promise.all([onA.close(), onB.close(), poster.close()]);
    }
  }, 150_000);

  it("a wait on one replica is woken by a post through another, and the own post of the waiting drone does not wake it", async () => {
    const token = acme.clients[0]!.token;
    const onA = await pullOnlyHost(system.url, token);
    const onB = await pullOnlyHost(b.url, token, onA.sessionId);
    const poster = await pullOnlyHost(system.url, acme.clients[1]!.token);
    try {
      await onA.text("seat_attach", { cube_id: acme.cubeId });
      await poster.text("seat_attach", { cube_id: acme.cubeId });
      await onA.text("log_read", { page_size: 500 });
      const [listening, passed] = [
        await waitEvents(b.metricsUrl, "listening"),
        await waitEvents(b.metricsUrl, "passed"),
      ];
      let settled = false;
      const waiting = onB.text("log_wait", { timeout_s: 40 }).finally(() => {
        settled = true;
      });
      await waitEventAfter(b.metricsUrl, "listening", listening);
      expect(await onA.text("log_post", { message: "my own words" })).toMatch(/^posted #\d+$/);
      // The own post reached the wait on replica B and passed it by.
      await waitEventAfter(b.metricsUrl, "passed", passed);
      expect(settled).toBe(false);
      await poster.text("log_post", { message: "through replica A" });
      const woken = await waiting;
      expect(messages(woken)).toEqual(["through replica A"]);
    } finally {
      await Promise.all([onA.close(), onB.close(), poster.close()]);
    }
  }, 120_000);

  it("a wait whose seat is revoked ends in a tool error saying so", async () => {
    const issued = await call<{ client: { id: string }; token: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: "wait-then-revoked" },
      acme.user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: issued.client.id, cubeId: acme.cubeId, access: "CUBE_ACCESS_WRITE" },
      acme.user,
    );
    const host = await pullOnlyHost(system.url, issued.token);
    try {
      await host.text("seat_attach", { cube_id: acme.cubeId });
      await host.text("log_read");
      const listening = await waitEvents(system.metricsUrl, "listening");
      const waiting = host.tool("log_wait", { timeout_s: 45 });
      await waitEventAfter(system.metricsUrl, "listening", listening);
      await call(system, "unimatrix.cube.v1.IdentityService/RevokeClient", { clientId: issued.client.id }, acme.user);
      const result = await waiting;
      expect(result.isError).toBe(true);
      expect(result.content[0]!.text).toMatch(/^UNAUTHENTICATED: /);
      await eventually(async () => (await host.tool("log_read")).isError === true, "later calls to be tool errors");
    } finally {
      await host.close().catch(() => {});
    }
  }, 90_000);
});
