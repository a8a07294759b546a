import { status as grpcStatus } from "@grpc/grpc-js";
import type { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import type { TypedClient } from "@unimatrix/service-kit/grpc";
import { type activityClient, bearer } from "./grpc";
import { GatewayRouter } from "./http";
import { Ledger } from "./ledger";
import { StatelessAgent } from "./mcp-stateless";
import { poll } from "./processes";
import type { World } from "./world";

/** Who probes, and with what: a cube and a presence client, the gateways, the world and its credentials. */
export interface ProbeDeps {
  readonly activity: ReturnType<typeof activityClient>;
  readonly machines: TypedClient<typeof MachineService>;
  readonly gateways: () => readonly string[];
  readonly world: World;
  /** A reader's, an MCP agent's and a watcher's client token. */
  readonly tokens: { readonly reader: string; readonly mcp: string; readonly watcher: string };
}

/** What each surface answers a cursor (`activity`) and a machines cursor (`machines`), in one line each. */
export interface ProbeAnswers {
  readonly readActivity: string;
  readonly subscribeActivity: string;
  readonly sse: string;
  readonly mcpListen: string;
  readonly watchMachines: string;
}

const refusal = (error: unknown) =>
  `${grpcStatus[(error as { code?: number }).code ?? -1] ?? String(error)}: ${(error as { details?: string }).details ?? ""}`;

/** The first answer of a server stream in one line (its event's case, or the refusal), then cancels it. */
async function firstOf<T>(open: (signal: AbortSignal) => AsyncIterable<T>, describe: (m: T) => string) {
  const controller = new AbortController();
  try {
    for await (const message of open(controller.signal)) return describe(message);
    return "ended";
  } catch (error) {
    return refusal(error);
  } finally {
    controller.abort();
  }
}

/**
 * Asks every surface to resume from `activity` (an activity cursor) and `machines` (a presence
 * cursor) and writes down the first answer: ReadActivity and SubscribeActivity on cube, SSE with
 * `Last-Event-ID` through a gateway, an MCP 2026 listen with `after` (what it delivered and how it
 * ended), WatchMachines on presence.
 */
export async function probeCursors(deps: ProbeDeps, activity: string, machines: string): Promise<ProbeAnswers> {
  const { world, tokens } = deps;
  const deadline = () => Date.now() + 5_000;
  const readActivity = await deps.activity
    .readActivity({ cubeId: world.cubeId, cursor: activity }, bearer(tokens.reader, { deadline: deadline() }))
    .then((page) => `OK ${page.items.length} items`, refusal);
  const subscribeActivity = await firstOf(
    (signal) =>
      deps.activity.subscribeActivity(
        { cubeId: world.cubeId, after: activity },
        bearer(tokens.reader, { signal, deadline: deadline() }),
      ),
    (message) => `OK ${message.event.case}`,
  );
  const answer = await fetch(`${deps.gateways()[0]}/v1/cubes/${world.cubeId}/events`, {
    headers: { authorization: `Bearer ${tokens.reader}`, "Last-Event-ID": activity },
    signal: AbortSignal.timeout(5_000),
  });
  const sse = `${answer.status} ${((await answer.json().catch(() => ({}))) as { code?: string }).code}`;
  const watchMachines = await firstOf(
    (signal) =>
      deps.machines.watchMachines({ after: machines }, bearer(tokens.watcher, { signal, deadline: deadline() })),
    ({ event }) => (event.case === "machineSnapshot" ? `snapshot reset=${event.value.reset}` : `${event.case}`),
  );
  return { readActivity, subscribeActivity, sse, mcpListen: await listenOnce(deps, activity), watchMachines };
}

/** One MCP 2026 listen from `after` (on a seat of its own): how it ended and what it delivered. */
async function listenOnce(deps: ProbeDeps, after: string): Promise<string> {
  const ledger = new Ledger();
  const agent = await StatelessAgent.open(
    new GatewayRouter(deps.gateways, ledger, "mcp-2026 probe listen", 0),
    new GatewayRouter(deps.gateways, ledger, "mcp-2026 probe post", 0),
    deps.tokens.mcp,
    ledger,
    "mcp-2026 probe listen",
    after,
  );
  await agent.attach(deps.world.cubeId, deps.world.roleId);
  const stop = new AbortController();
  const listening = agent.listenLoop(stop.signal);
  await poll(() => agent.record.breaks.length > 0, "the probe listen to end", 10_000).catch(() => {});
  stop.abort();
  await listening;
  await agent.close();
  return `${agent.record.breaks[0]?.reason ?? "still listening"}; ${agent.record.delivered.length} delivered`;
}
