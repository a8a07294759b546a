// Token economy of the MCP surface (issue 15): a scripted agent session through the MCP SDK client —
// attach, read the directive, read two waiting messages, post, ack, claim, then catch up on 50
// entries after an absence — counting per step the tool calls and the characters of `content`
// (text), of `structuredContent` and of pushes, and of `tools/list`. Characters are what an agent's
// host passes to the model; ~4 characters make a token. It runs on both MCP revisions: 2025-11-25
// through the v1 SDK client (a session; pushes are `notifications/message`; the absence ends the
// session, so the agent re-attaches) and 2026-07-28 through the v2 SDK client (no session; the seat
// is the `seat` input; pushes arrive on `subscriptions/listen`; nothing to re-attach).
//
// It adapts to the gateway it talks to: on one without `log_wait` (the surface before issue 15) it
// does what that surface needs (cube_get for the directive, entry ids from structuredContent, paging
// the catch-up 50 at a time, a role id to attach). Run alone against any built tree:
//   BENCH_SYSTEM_ROOT=/path/to/tree npx tsx services/gateway/bench/mcp-economy.ts
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Client as StatelessClient,
  StreamableHTTPClientTransport as StatelessTransport,
} from "@modelcontextprotocol/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { SERVICE_NAMES } from "@unimatrix/app";
import {
  bench,
  spawnSystem,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  testBusPrefix,
  uniqueName,
} from "@unimatrix/service-kit/testing";
import pg from "pg";

const OPERATOR = "umx_operator_mcpeconomy_0123456789abcdef";
const KEY = "mcp-economy-bench-internal-key-0123456789ab";

/** One step of the session and what it cost. */
export interface Step {
  readonly name: string;
  calls: number;
  content: number;
  structured: number;
  pushes: number;
  /** Of `pushes`, what the deliveries themselves carry: the line and its handles, not the protocol's frame. */
  payload: number;
}

/** The MCP revisions the session runs on. */
export type Revision = "2025-11-25" | "2026-07-28";

export interface EconomyReport {
  readonly revision: Revision;
  readonly steps: Step[];
  /** Entries and notifications pushed to the agent (to give push characters per item). */
  readonly pushedItems: number;
  readonly toolsList: number;
  readonly tools: number;
  readonly compact: boolean;
  /** The text of the catch-up read (to check the same information is there). */
  readonly catchUp: string;
}

interface ToolResult {
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  content: { type: string; text?: string }[];
}

const DIRECTIVE =
  "Ship the billing service v2: migrate invoices to the new ledger, keep the public API stable, " +
  "and post a status line after every finished task. Claim a task before you start it.";
/** A status line of about 70 characters, the size the issue measured with. */
const line = (i: number) =>
  `status ${String(i).padStart(2, "0")}: invoice batch ${i} migrated, 0 errors; next batch queued`;

/** What the session needs of an MCP client, whichever SDK and revision. */
interface Agent {
  listTools(): Promise<{ tools: { name: string }[] }>;
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>;
  close(): Promise<void>;
}

/** Runs the session against the gateway at `url`, on `revision`. */
export async function mcpEconomy(
  url: string,
  operatorToken = OPERATOR,
  revision: Revision = "2025-11-25",
): Promise<EconomyReport> {
  const stateless = revision === "2026-07-28";
  const call = async <T>(path: string, body: unknown, token: string): Promise<T> => {
    const response = await fetch(`${url}/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  };
  const tenant = await call<{ adminUserToken: string }>(
    "unimatrix.cube.v1.IdentityService/CreateTenant",
    { name: uniqueName("economy"), adminDisplayName: "economy" },
    operatorToken,
  );
  const user = tenant.adminUserToken;
  const { cube } = await call<{ cube: { id: string } }>(
    "unimatrix.cube.v1.CubeService/CreateCube",
    { requestKey: crypto.randomUUID(), name: "billing", directive: DIRECTIVE },
    user,
  );
  const { role } = await call<{ role: { id: string } }>(
    "unimatrix.cube.v1.CubeService/CreateRole",
    { cubeId: cube.id, name: "worker", isDefault: true, canBroadcast: true, shortDescription: "does the tasks" },
    user,
  );
  const client = async (name: string) => {
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
  const [agentToken, peerToken] = [await client("agent"), await client("peer")];
  // The peer acts over Connect with its own seat (its traffic is not what is measured).
  const peer = await call<{ sessionToken: string; drone: { id: string } }>(
    "unimatrix.cube.v1.CubeService/AttachSeat",
    { cubeId: cube.id, roleId: role.id, hostname: "peer" },
    peerToken,
  );
  const peerPost = (message: string, to?: string) =>
    call<{ entry: { id: string } }>(
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      {
        cubeId: cube.id,
        message,
        visibility: to ? "VISIBILITY_DIRECT" : "VISIBILITY_BROADCAST",
        ...(to ? { recipientDroneIds: [to] } : {}),
      },
      peer.sessionToken,
    );

  const steps: Step[] = [];
  let current: Step | undefined;
  const step = (name: string) => {
    current = { name, calls: 0, content: 0, structured: 0, pushes: 0, payload: 0 };
    steps.push(current);
  };
  let pushedItems = 0;
  /** Counts a push: all of its params, and its payload (2025: `data`; 2026: `_meta` without the subscription id). */
  const pushed = (params: { data?: unknown; _meta?: Record<string, unknown> }) => {
    if (!current) return;
    current.pushes += JSON.stringify(params).length;
    const { "io.modelcontextprotocol/subscriptionId": _, ...own } = params._meta ?? {};
    current.payload += JSON.stringify(stateless ? own : params.data).length;
    pushedItems += 1;
  };
  const requestInit = { headers: { authorization: `Bearer ${agentToken}` } };
  /** The v2 client of the 2026-07-28 session, for listening (set once it is connected). */
  let modern: StatelessClient | undefined;
  const connect = async (): Promise<Agent> => {
    if (stateless) {
      const mcp = new StatelessClient(
        { name: "economy-agent", version: "1.0.0" },
        { versionNegotiation: { mode: { pin: "2026-07-28" } } },
      );
      mcp.setNotificationHandler("notifications/resources/updated", (notification) =>
        pushed(notification.params as { _meta?: Record<string, unknown> }),
      );
      await mcp.connect(new StatelessTransport(new URL(`${url}/mcp`), { requestInit }));
      modern = mcp;
      return mcp;
    }
    const mcp = new Client({ name: "economy-agent", version: "1.0.0" });
    mcp.setNotificationHandler(LoggingMessageNotificationSchema, (notification) =>
      pushed(notification.params as { data?: unknown }),
    );
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit }));
    return mcp;
  };
  let mcp = await connect();
  const { tools } = await mcp.listTools();
  const toolsList = JSON.stringify(tools).length;
  const compact = tools.some((t) => t.name === "log_wait");
  const text = (result: ToolResult) => result.content[0]?.text ?? "";
  /** The seat on 2026-07-28: every call after the attach names it. */
  let seatInput: Record<string, unknown> = {};
  const tool = async (name: string, args: Record<string, unknown> = {}) => {
    const result = (await mcp.callTool({ name, arguments: { ...args, ...seatInput } })) as ToolResult;
    if (result.isError) throw new Error(`${name}: ${result.content[0]?.text}`);
    current!.calls += 1;
    current!.content += result.content.reduce((n, c) => n + (c.text?.length ?? JSON.stringify(c).length), 0);
    current!.structured += result.structuredContent ? JSON.stringify(result.structuredContent).length : 0;
    return result;
  };
  /** Lets pushes of the step arrive before the next step counts its own. */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

  step("attach");
  const seat = await tool("seat_attach", compact ? { cube_id: cube.id } : { cube_id: cube.id, role_id: role.id });
  // The compact surface is used from its text alone (what a host showing only `content` sees).
  const sessionToken = compact
    ? /session_token[^:]*: (umx_drone_\S+)/.exec(text(seat))![1]!
    : (seat.structuredContent!.session_token as string);
  const label = compact ? /you are (\S+)/.exec(text(seat))![1]! : "";
  const drones = await call<{ drones: { id: string; label: string }[] }>(
    "unimatrix.cube.v1.CubeService/ListDrones",
    { cubeId: cube.id },
    peer.sessionToken,
  );
  const droneId = compact
    ? drones.drones.find((d) => d.label === label)!.id
    : (seat.structuredContent!.drone_id as string);
  let listening: Awaited<ReturnType<StatelessClient["listen"]>> | undefined;
  if (stateless) {
    seatInput = { seat: sessionToken };
    listening = await modern!.listen({ resourceSubscriptions: [`unimatrix://inbox?seat=${sessionToken}`] });
  }
  await settle();

  step("read directive");
  if (!compact) await tool("cube_get");
  // (the compact surface shows the directive in seat_attach's answer)

  step("read two waiting messages");
  const direct = await peerPost("agent: please take the ledger schema review first, then the API check", droneId);
  const task = await peerPost("task: migrate invoice batches 1-50 to the new ledger (claim before starting)");
  await settle();
  const read = await tool("log_read", compact ? {} : { unread: true });
  // The compact surface takes an entry as its #position, read from the text; the older one needs ids.
  const refOf = (id: string, message: string) => {
    if (!compact) return id;
    const found = text(read)
      .split("\n")
      .find((l) => l.includes(message.slice(0, 30)));
    return /^#(\d+)/.exec(found ?? "")?.[0] ?? id;
  };
  await settle();

  step("post");
  await tool("log_post", { message: "on it: reviewing the ledger schema now, then the API compatibility check" });
  await settle();

  step("ack");
  await tool("log_ack", { entry_id: refOf(direct.entry.id, "agent: please take the ledger") });
  await settle();

  step("claim");
  await tool("log_claim", { entry_id: refOf(task.entry.id, "task: migrate invoice batches") });
  await settle();

  // The absence: the agent's MCP session ends; 50 entries land meanwhile (2 of them direct to the
  // agent), and the peer acks the agent's post (a notification): 51 items wait.
  await listening?.close();
  await mcp.close();
  current = undefined;
  for (let i = 1; i <= 50; i++) await peerPost(line(i), i === 17 || i === 41 ? droneId : undefined);
  const history = await call<{ items: { entry?: { id: string; author?: { droneId?: string } } }[] }>(
    "unimatrix.cube.v1.ActivityService/ReadActivity",
    { cubeId: cube.id, pageSize: 10 },
    peer.sessionToken,
  );
  const agentPost = history.items.find((i) => i.entry?.author?.droneId === droneId)?.entry?.id;
  if (agentPost) {
    await call(
      "unimatrix.cube.v1.ActivityService/AckEntry",
      { cubeId: cube.id, entryId: agentPost },
      peer.sessionToken,
    );
  }

  step("re-attach after the absence");
  mcp = await connect();
  // On 2026-07-28 the agent still holds its seat: nothing to re-attach.
  if (!stateless) {
    await tool(
      "seat_attach",
      compact
        ? { cube_id: cube.id, session_token: sessionToken }
        : { cube_id: cube.id, role_id: role.id, session_token: sessionToken },
    );
  }
  await settle();

  step("catch up (51 items)");
  let catchUp = "";
  if (compact) {
    catchUp = text(await tool("log_read"));
  } else {
    for (let page = 0; page < 10; page++) {
      const result = await tool("log_read", { unread: true });
      catchUp += JSON.stringify(result.structuredContent);
      if (!(result.structuredContent as { hasMore?: boolean }).hasMore) break;
    }
  }
  await settle();
  await mcp.close();
  return { revision, steps, pushedItems, toolsList, tools: tools.length, compact, catchUp };
}

/** Sums of a report's steps. */
function totals(report: EconomyReport) {
  const total = { calls: 0, content: 0, structured: 0, pushes: 0, payload: 0 };
  for (const s of report.steps) {
    total.calls += s.calls;
    total.content += s.content;
    total.structured += s.structured;
    total.pushes += s.pushes;
    total.payload += s.payload;
  }
  return total;
}

/**
 * Prints the session on each revision side by side, and the BENCH lines: `gateway.mcp.*` for
 * 2025-11-25 (the names the bench has always printed) and `gateway.mcp.stateless.*` for 2026-07-28.
 */
export function printEconomy(...reports: EconomyReport[]): void {
  const out = (s: string) => process.stdout.write(s);
  out("\nMCP token economy: one agent session (calls / content + structured chars / push chars)\n");
  out(`| step | ${reports.map((r) => r.revision).join(" | ")} |\n|---|${reports.map(() => "---").join("|")}|\n`);
  for (const [i, step] of reports[0]!.steps.entries()) {
    const cells = reports.map((r) => {
      const s = r.steps[i]!;
      return `${s.calls} / ${s.content + s.structured} / ${s.pushes}`;
    });
    out(`| ${step.name} | ${cells.join(" | ")} |\n`);
  }
  const cells = reports.map((r) => {
    const t = totals(r);
    return `**${t.calls} / ${t.content + t.structured} / ${t.pushes}**`;
  });
  out(`| **total** | ${cells.join(" | ")} |\n`);
  out(`| tools/list chars | ${reports.map((r) => r.toolsList).join(" | ")} |\n`);
  for (const report of reports) {
    const prefix = report.revision === "2026-07-28" ? "gateway.mcp.stateless" : "gateway.mcp";
    const total = totals(report);
    bench(`${prefix}.calls`, total.calls, "calls");
    bench(`${prefix}.content_chars`, total.content, "chars");
    bench(`${prefix}.structured_chars`, total.structured, "chars");
    bench(`${prefix}.result_chars`, total.content + total.structured, "chars");
    bench(`${prefix}.push_chars`, total.pushes, "chars");
    bench(`${prefix}.push_chars_per_item`, Math.round(total.pushes / Math.max(1, report.pushedItems)), "chars");
    bench(`${prefix}.push_payload_per_item`, Math.round(total.payload / Math.max(1, report.pushedItems)), "chars");
    bench(`${prefix}.tools_list_chars`, report.toolsList, "chars");
    const last = report.steps.at(-1)!;
    bench(`${prefix}.catchup_chars`, last.content + last.structured, "chars");
  }
}

/** Starts a built tree's system (`apps/unimatrix/dist/main.js`) on a fresh database. */
async function startTree(root: string, database: string): Promise<{ child: ChildProcess; gateway: string }> {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${database}`;
  const { child, ports } = await spawnSystem({
    entry: join(root, "apps", "unimatrix", "dist", "main.js"),
    // A scratch working directory: nothing is written into the tree that is measured.
    cwd: mkdtempSync(join(tmpdir(), "mcp-economy-")),
    services: SERVICE_NAMES,
    env: {
      DATABASE_URL: url.toString(),
      REDIS_URL: TEST_REDIS_URL,
      UMX_BUS_PREFIX: testBusPrefix("bench-mcp"),
      UMX_INTERNAL_KEY: KEY,
      UMX_OPERATOR_TOKEN: OPERATOR,
      GATEWAY_RATE_LIMIT_PER_SECOND: "0",
      CUBE_LIVENESS_INTERVAL_MS: "0",
    },
    echo: true,
  });
  const gateway = `http://127.0.0.1:${ports.gateway}`;
  return { child, gateway };
}

async function main() {
  const root = process.env.BENCH_SYSTEM_ROOT ?? join(__dirname, "..", "..", "..");
  const database = uniqueName("bench_mcp");
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const { child, gateway } = await startTree(root, database);
  try {
    printEconomy(await mcpEconomy(gateway), await mcpEconomy(gateway, OPERATOR, "2026-07-28"));
  } finally {
    child.kill("SIGTERM");
    await once(child, "exit");
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack}\n`);
      process.exit(1);
    },
  );
}
