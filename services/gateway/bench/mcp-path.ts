// The agent path (issue 31): what one MCP tool call costs beside the same Connect call on the same
// system, how soon a post reaches another agent's listen, and how soon it wakes a waiting
// `log_wait`. Agents are stock MCP SDK v2 clients on revision 2026-07-28 (no session; the seat is
// the `seat` input). It prints, with `suffix` naming the store (`""` Postgres + Redis,
// `.embedded` the embedded default):
//   BENCH mcp.post.p50_ms / p99_ms            log_post round trip
//   BENCH mcp.post.connect_p50_ms             Connect AppendEntry, same seat, interleaved with the above
//   BENCH mcp.post.p50_ratio                  the two p50s' ratio (target ≤ 1.3)
//   BENCH mcp.push.p50_ms / p99_ms            post (Connect) → the line on the other agent's listen
//   BENCH mcp.wait_wake.p50_ms / p99_ms       a direct posted → the other agent's log_wait returns
//   BENCH mcp.path.exactly_once               1 when every post was heard once and every wait woke
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { bench, uniqueName } from "@unimatrix/service-kit/testing";

const POSTS = Number(process.env.BENCH_MCP_POSTS ?? 300);
// 300 each, so that a p99 is a percentile: of 100 wakes it was the slowest one (of 200 pushes the second).
const PUSHES = Number(process.env.BENCH_MCP_PUSHES ?? 300);
const WAKES = Number(process.env.BENCH_MCP_WAKES ?? 300);

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const summary = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: pct(sorted, 50), p99: pct(sorted, 99) };
};

interface ToolResult {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text?: string }[];
}

/** A stock SDK v2 agent pinned to 2026-07-28. */
async function agent(url: string, token: string) {
  const client = new Client(
    { name: "path-bench", version: "1.0.0" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  const tool = async (name: string, args: Record<string, unknown>) => {
    const result = (await client.callTool({ name, arguments: args })) as ToolResult;
    if (result.isError) throw new Error(`${name}: ${result.content.map((c) => c.text).join(" ")}`);
    return result;
  };
  return { client, tool };
}

/** A gateway counter's value (0 when absent). */
async function counter(metricsUrl: string, line: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.split(" ")[1]) : 0;
}

/** Runs the three measurements against the gateway at `url` and prints their BENCH lines. */
export async function mcpPath(url: string, operatorToken: string, metricsUrl: string, suffix = ""): Promise<void> {
  const call = async <T>(path: string, body: unknown, token: string): Promise<T> => {
    const response = await fetch(`${url}/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  };
  const { adminUserToken: user } = await call<{ adminUserToken: string }>(
    "unimatrix.cube.v1.IdentityService/CreateTenant",
    { name: uniqueName("path"), adminDisplayName: "path" },
    operatorToken,
  );
  const { cube } = await call<{ cube: { id: string } }>(
    "unimatrix.cube.v1.CubeService/CreateCube",
    { requestKey: crypto.randomUUID(), name: "path", directive: "measure the agent path" },
    user,
  );
  await call(
    "unimatrix.cube.v1.CubeService/CreateRole",
    { cubeId: cube.id, name: "worker", isDefault: true, canBroadcast: true },
    user,
  );
  const issue = async (name: string) => {
    const issued = await call<{ client: { id: string }; token: string }>(
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name },
      user,
    );
    await call(
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: issued.client.id, cubeId: cube.id, access: "CUBE_ACCESS_WRITE" },
      user,
    );
    return issued.token;
  };
  const listener = await agent(url, await issue("listener"));
  const poster = await agent(url, await issue("poster"));
  const seatOf = async (a: Awaited<ReturnType<typeof agent>>) =>
    (await a.tool("seat_attach", { cube_id: cube.id })).structuredContent as { session_token: string; label: string };
  const [heard, said] = [await seatOf(listener), await seatOf(poster)];
  const connectPost = (message: string, to?: string) =>
    call(
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      {
        cubeId: cube.id,
        message,
        visibility: to ? "VISIBILITY_DIRECT" : "VISIBILITY_BROADCAST",
        ...(to ? { recipientLabels: [to] } : {}),
      },
      said.session_token,
    );
  let faults = 0;

  // 1. log_post beside Connect AppendEntry, interleaved so both see the same system.
  const mcp: number[] = [];
  const connect: number[] = [];
  for (let i = 0; i < 20; i++) {
    await poster.tool("log_post", { seat: said.session_token, message: `warm ${i}` });
    await connectPost(`warm ${i}`);
  }
  for (let i = 0; i < POSTS; i++) {
    let t = nowMs();
    await poster.tool("log_post", { seat: said.session_token, message: `mcp ${i}` });
    mcp.push(nowMs() - t);
    t = nowMs();
    await connectPost(`connect ${i}`);
    connect.push(nowMs() - t);
  }
  // The listener's inbox holds all of that: take it, so the waits below start empty.
  for (let more = true; more; ) {
    const read = await listener.tool("log_read", { seat: heard.session_token });
    more = (read.structuredContent as { more?: boolean } | undefined)?.more === true;
  }

  // 2. A post (Connect) → its line on the listener's `subscriptions/listen`.
  const waiting = new Map<string, () => void>();
  const seen = new Map<string, number>();
  listener.client.setNotificationHandler("notifications/resources/updated", (note) => {
    const line = String((note.params._meta as Record<string, unknown>).line ?? "");
    const tag = /push (\d+)$/.exec(line)?.[1];
    if (tag === undefined) return;
    seen.set(tag, (seen.get(tag) ?? 0) + 1);
    waiting.get(tag)?.();
  });
  const subscription = await listener.client.listen({
    resourceSubscriptions: [`unimatrix://inbox?seat=${encodeURIComponent(heard.session_token)}`],
  });
  const push: number[] = [];
  for (let i = 0; i < PUSHES; i++) {
    const arrived = new Promise<void>((resolve) => waiting.set(String(i), resolve));
    const t = nowMs();
    await Promise.all([connectPost(`push ${i}`), arrived]);
    push.push(nowMs() - t);
    waiting.delete(String(i));
  }
  await subscription.close();
  if ([...seen.values()].some((n) => n !== 1) || seen.size !== PUSHES) faults++;
  for (let more = true; more; ) {
    const read = await listener.tool("log_read", { seat: heard.session_token });
    more = (read.structuredContent as { more?: boolean } | undefined)?.more === true;
  }

  // 3. A direct → a waiting log_wait returns. The post goes out once the wait is listening (the
  // gateway's counter says so), and the time runs from the post to the wait's answer.
  const listening = 'unimatrix_gateway_mcp_wait_events_total{event="listening"}';
  const wake: number[] = [];
  for (let i = 0; i < WAKES; i++) {
    const before = await counter(metricsUrl, listening);
    let posted = 0;
    const wait = listener.tool("log_wait", { seat: heard.session_token, only: "direct", timeout_s: 30 }).then((r) => {
      wake.push(nowMs() - posted);
      return r;
    });
    while ((await counter(metricsUrl, listening)) <= before) await new Promise((r) => setTimeout(r, 2));
    posted = nowMs();
    await connectPost(`wake ${i}`, heard.label);
    const result = await wait;
    if (!result.content.some((c) => c.text?.includes(`wake ${i}`))) faults++;
  }
  await listener.client.close();
  await poster.client.close();

  const [m, c, p, w] = [summary(mcp), summary(connect), summary(push), summary(wake)];
  process.stdout.write(
    `\nMCP agent path (${suffix ? "embedded" : "Postgres + Redis"}): log_post p50/p99 ${m.p50.toFixed(1)}/${m.p99.toFixed(1)} ms ` +
      `beside Connect AppendEntry ${c.p50.toFixed(1)}/${c.p99.toFixed(1)} ms; push p50/p99 ${p.p50.toFixed(1)}/${p.p99.toFixed(1)} ms; ` +
      `log_wait wake p50/p99 ${w.p50.toFixed(1)}/${w.p99.toFixed(1)} ms\n`,
  );
  bench(`mcp.post.p50_ms${suffix}`, m.p50, "ms");
  bench(`mcp.post.p99_ms${suffix}`, m.p99, "ms");
  bench(`mcp.post.connect_p50_ms${suffix}`, c.p50, "ms");
  bench(`mcp.post.p50_ratio${suffix}`, m.p50 / c.p50, "ratio");
  bench(`mcp.push.p50_ms${suffix}`, p.p50, "ms");
  bench(`mcp.push.p99_ms${suffix}`, p.p99, "ms");
  bench(`mcp.wait_wake.p50_ms${suffix}`, w.p50, "ms");
  bench(`mcp.wait_wake.p99_ms${suffix}`, w.p99, "ms");
  bench(`mcp.path.exactly_once${suffix}`, faults === 0 ? 1 : 0, "bool");
}
