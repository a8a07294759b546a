import { setMaxListeners } from "node:events";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";
import { Fleet } from "./fleet";
import { appendOverConnect, followSse } from "./gateway-clients";
import {
  type Acked,
  activityClient,
  appendOverGrpc,
  bearer,
  cycleLinks,
  followActivity,
  followMachines,
  type LinkStats,
  PICK_FIRST,
  ROUND_ROBIN,
} from "./grpc";
import { GatewayRouter } from "./http";
import { McpAgent } from "./mcp";
import { StatelessAgent } from "./mcp-stateless";
import { poll } from "./processes";
import { StreamRecord } from "./streams";
import { type LogEntry, readLog, replayTransitions } from "./truth";
import { seedWorld, type World } from "./world";

/** Clients of the world, by job. */
const C = { grpcWriter: 0, connectWriter: 1, mcpA: 2, mcpB: 3, grpcReader: 4, sseReader: 5, watchGrpc: 6, watchSse: 7 };

/** How the MCP sessions are spread. */
export type McpSpread =
  /** Each session stays on the gateway it was opened on (until that gateway dies). */
  | "sticky"
  /** mcp-2 is initialized on gateway A and continued on B (any gateway serves any request). */
  | "cross";

/** What a scenario leaves out. */
export interface ScenarioOptions {
  /** The MCP 2026-07-28 agent (default true; a fleet whose gateways predate that revision cannot serve it). */
  readonly mcp2026?: boolean;
}

/**
 * Steady load on a running fleet through every surface, and every long-lived stream kept open, each
 * recording what it delivered. Faults are the test's business; this drives and records.
 */
export class Scenario {
  readonly acked: Acked[] = [];
  readonly activity: StreamRecord[] = [];
  readonly presence: StreamRecord[] = [];
  readonly presenceStart = new Map<StreamRecord, string>();
  readonly links = new Map<string, LinkStats>();
  readonly agents: McpAgent[] = [];
  /** The MCP 2026-07-28 agent: listens through gateway A (then wherever its router goes), posts through B. */
  readonly stateless: StatelessAgent[] = [];
  readonly sse: { close(): void; gaveUp(): boolean; record: StreamRecord }[] = [];
  genesis = "";
  readonly #streams = new AbortController();
  readonly #load = new AbortController();
  readonly #loops: Promise<void>[] = [];
  readonly #followers: Promise<void>[] = [];
  readonly #activity: ReturnType<typeof activityClient>;
  readonly #machines: TypedClient<typeof MachineService>;
  readonly #link: TypedClient<typeof LinkService>;
  readonly #extra: { close(): void }[] = [];
  readonly fleet: Fleet;
  readonly world: World;

  private constructor(fleet: Fleet, world: World) {
    // Every loop and follower listens on these two signals.
    setMaxListeners(200, this.#streams.signal, this.#load.signal);
    this.fleet = fleet;
    this.world = world;
    // Internal gRPC clients spread over every replica, as every internal client must.
    this.#activity = activityClient(Fleet.target(fleet.cube));
    this.#machines = createClient(MachineService, Fleet.target(fleet.presence), undefined, ROUND_ROBIN);
    this.#link = createClient(LinkService, Fleet.target(fleet.presence), undefined, ROUND_ROBIN);
  }

  /** Seeds the world (`clients` credentials at least 8: the test may use those past the eighth), opens every stream (waiting until each is live) and starts the load. */
  static async start(fleet: Fleet, spread: McpSpread, clients = 8, options: ScenarioOptions = {}): Promise<Scenario> {
    const world = await seedWorld(fleet.gatewayUrls()[0]!, Math.max(8, clients), 4);
    const s = new Scenario(fleet, world);
    await s.#open(spread, options.mcp2026 ?? true);
    s.#startLoad();
    return s;
  }

  #token(job: keyof typeof C): string {
    return this.world.clients[C[job]]!.token;
  }

  #router(label: string, preferred: number): GatewayRouter {
    return new GatewayRouter(() => this.fleet.gatewayUrls(), this.fleet.ledger, label, preferred);
  }

  /** The fleet process at a peer address. */
  readonly peerName = (peer: string): string => this.fleet.processes.find((p) => p.address === peer)?.name ?? peer;
  /** The fleet process behind a gateway URL. */
  readonly gatewayName = (url: string): string => this.peerName(new URL(url).host);

  async #open(spread: McpSpread, mcp2026: boolean): Promise<void> {
    const { fleet, world } = this;
    const signal = this.#streams.signal;
    const genesis = await this.#activity.appendEntry(
      { cubeId: world.cubeId, message: "genesis", visibility: Visibility.BROADCAST },
      bearer(this.#token("grpcWriter"), { deadline: 10_000 }),
    );
    this.genesis = genesis.entry!.cursor;
    for (const i of [1, 2]) {
      const record = new StreamRecord(`grpc activity #${i}`, "grpc", "activity", this.genesis);
      this.activity.push(record);
      this.#followers.push(
        followActivity(
          record,
          this.#activity,
          this.#token("grpcReader"),
          world.cubeId,
          fleet.ledger,
          this.peerName,
          signal,
        ),
      );
    }
    for (const [i, gateway] of [0, 0, 1, 1].entries()) {
      const name = `sse activity #${i + 1} (${fleet.gateways[gateway]!.name})`;
      const record = new StreamRecord(name, "sse", "activity", this.genesis);
      const router = this.#router(`sse activity #${i + 1}`, gateway);
      const path = `/v1/cubes/${world.cubeId}/events`;
      const source = followSse(record, router, path, this.#token("sseReader"), fleet.ledger, this.gatewayName);
      this.activity.push(record);
      this.sse.push({ ...source, record });
    }
    // Two readers of different credentials per gateway open from the head (no Last-Event-ID): they
    // see the same, so each gateway serves them from ONE shared upstream, which must follow cube
    // replicas' deaths and a cut bus for both (their EventSource resumes on its own after a gateway dies).
    for (const [i, [gateway, job]] of (
      [
        [0, "sseReader"],
        [0, "grpcReader"],
        [1, "sseReader"],
        [1, "grpcReader"],
      ] as const
    ).entries()) {
      const name = `sse activity from the head #${i + 1} (${fleet.gateways[gateway]!.name}, shared)`;
      const record = new StreamRecord(name, "sse", "activity", "");
      const router = this.#router(`sse head #${i + 1}`, gateway);
      const path = `/v1/cubes/${world.cubeId}/events`;
      const source = followSse(record, router, path, this.#token(job), fleet.ledger, this.gatewayName);
      this.activity.push(record);
      this.sse.push({ ...source, record });
    }
    // One follower stays on cube-2 while it answers (pick_first): the one a drain of cube-2 must move.
    const cube2First = activityClient(Fleet.target([fleet.cube[1]!, fleet.cube[0]!]), true);
    this.#extra.push(cube2First);
    const pinned = new StreamRecord("grpc activity #3 (cube-2 first)", "grpc", "activity", this.genesis);
    this.activity.push(pinned);
    this.#followers.push(
      followActivity(pinned, cube2First, this.#token("grpcReader"), world.cubeId, fleet.ledger, this.peerName, signal),
    );
    await poll(() => this.activity.every((r) => r.readyCount > 0), "every activity stream to be live", 30_000);

    for (const [i, job] of (["mcpA", "mcpB"] as const).entries()) {
      const router = this.#router(`mcp-${i + 1}`, 0);
      const agent = await McpAgent.open(router, this.#token(job), fleet.ledger, `mcp-${i + 1}`);
      if (spread === "cross" && i === 1) router.pin(1);
      await agent.attach(world.cubeId, world.roleId);
      this.agents.push(agent);
      this.activity.push(agent.record);
    }
    // MCP 2026-07-28: no session; the seat travels with the agent. It listens from genesis (its cursor).
    if (mcp2026) await this.#openStateless(signal);
    // The push follows from the head at seat_attach: a probe every stream must see proves each is live.
    const probe = await this.#activity.appendEntry(
      { cubeId: world.cubeId, message: "probe", visibility: Visibility.BROADCAST },
      bearer(this.#token("grpcWriter"), { deadline: 10_000 }),
    );
    const probeKey = { id: probe.entry!.id, cursor: probe.entry!.cursor, message: "probe" };
    await poll(
      () => this.activity.every((r) => r.keys().includes(probeKey[r.keyedBy])),
      "every activity stream (gRPC, SSE, MCP push) to deliver the probe entry",
      30_000,
    );

    for (const i of [1, 2]) {
      const record = new StreamRecord(`grpc machines #${i}`, "grpc", "presence", "");
      this.presence.push(record);
      this.#followers.push(
        followMachines(record, this.#machines, this.#token("watchGrpc"), fleet.ledger, this.peerName, signal),
      );
    }
    const presence2First = createClient(
      MachineService,
      Fleet.target([fleet.presence[1]!, fleet.presence[0]!]),
      undefined,
      PICK_FIRST,
    );
    this.#extra.push(presence2First);
    const pinned2 = new StreamRecord("grpc machines #3 (presence-2 first)", "grpc", "presence", "");
    this.presence.push(pinned2);
    this.#followers.push(
      followMachines(pinned2, presence2First, this.#token("watchGrpc"), fleet.ledger, this.peerName, signal),
    );
    for (const [i, gateway] of [0, 1].entries()) {
      const name = `sse machines #${i + 1} (${fleet.gateways[gateway]!.name})`;
      const record = new StreamRecord(name, "sse", "presence", "");
      const router = this.#router(`sse machines #${i + 1}`, gateway);
      const source = followSse(
        record,
        router,
        "/v1/machines/events",
        this.#token("watchSse"),
        fleet.ledger,
        this.gatewayName,
      );
      this.presence.push(record);
      this.sse.push({ ...source, record });
    }
    await poll(() => this.presence.every((r) => r.readyCount > 0), "every machines stream to be live", 30_000);
    for (const record of this.presence) this.presenceStart.set(record, record.cursor);
  }

  /** The MCP 2026-07-28 agent: listens through gateway A (then wherever its router goes), posts through B. */
  async #openStateless(signal: AbortSignal): Promise<void> {
    const { fleet, world } = this;
    const listenRouter = this.#router("mcp-2026 listen", 0);
    const postRouter = this.#router("mcp-2026 post", 1);
    postRouter.pin(1);
    const stateless = await StatelessAgent.open(
      listenRouter,
      postRouter,
      this.#token("mcpA"),
      fleet.ledger,
      "mcp-2026 listen (A, then B)",
      this.genesis,
    );
    await stateless.attach(world.cubeId, world.roleId);
    this.stateless.push(stateless);
    this.activity.push(stateless.record);
    this.#followers.push(stateless.listenLoop(signal));
  }

  #startLoad(): void {
    const { fleet, world } = this;
    const signal = this.#load.signal;
    this.#loops.push(
      appendOverGrpc(this.#activity, this.#token("grpcWriter"), world.cubeId, fleet.ledger, this.acked, signal, 100),
      appendOverConnect(
        this.#router("connect", 0),
        this.#token("connectWriter"),
        world.cubeId,
        this.acked,
        signal,
        100,
      ),
      ...this.agents.map((agent) => agent.postLoop(this.acked, signal, 150)),
      ...this.stateless.map((agent) => agent.postLoop(this.acked, signal, 150)),
    );
    for (const machine of world.machines) {
      const stats: LinkStats = { links: 0, unlinks: 0, broken: 0 };
      this.links.set(machine.id, stats);
      this.#loops.push(cycleLinks(this.#link, machine, fleet.ledger, this.peerName, stats, signal, 300));
    }
  }

  /** Total `linked` answers the machines received so far. */
  linksSoFar(): number {
    return [...this.links.values()].reduce((sum, s) => sum + s.links, 0);
  }

  /** Waits until the load made progress: `entries` more acknowledged appends and `links` more links. */
  async progress(entries: number, links: number, what: string, timeoutMs = 30_000): Promise<void> {
    const [a, l] = [this.acked.length, this.linksSoFar()];
    await poll(
      () => this.acked.length >= a + entries && this.linksSoFar() >= l + links,
      `${entries} more acknowledged appends and ${links} more links (${what})`,
      timeoutMs,
    );
  }

  /** Stops the load (streams stay open) and waits for every loop to finish its last request. */
  async stopLoad(): Promise<void> {
    this.#load.abort();
    await Promise.all(this.#loops);
  }

  /**
   * After the load: the truth (the cube's log after genesis, the presence transitions after each
   * watcher's start), once every stream had the chance to deliver it (polled, with a deadline).
   * `tapped` replaces the read of the log when the run pruned it (a `LogTap`'s entries).
   */
  async settle(
    timeoutMs = 30_000,
    tapped?: () => Promise<LogEntry[]>,
  ): Promise<{ log: string[]; transitions: Map<StreamRecord, string[]>; authors: Map<string, string> }> {
    const { world } = this;
    const entries = tapped
      ? await tapped()
      : await readLog(this.#activity, this.#token("grpcReader"), world.cubeId, this.genesis);
    const log = entries.map((e) => e.id);
    const authors = new Map(entries.map((e) => [e.id, e.authorDroneId]));
    const keyOf = new Map(entries.map((e) => [e.id, { id: e.id, cursor: e.cursor, message: e.message }]));
    // Each stream's last entry (an MCP session is not sent its own drone's posts).
    const lastFor = (r: StreamRecord) => log.filter((id) => !r.ownDroneId || authors.get(id) !== r.ownDroneId).at(-1);
    await poll(
      () =>
        this.activity.every((r) => {
          const last = lastFor(r);
          return last === undefined || r.keys().includes(keyOf.get(last)![r.keyedBy]);
        }),
      "every activity stream to deliver the last entry of the log",
      timeoutMs,
      200,
    ).catch(() => {});
    const ids = {
      cursor: new Map(entries.map((e) => [e.cursor, e.id])),
      message: new Map(entries.map((e) => [e.message, e.id])),
    };
    for (const record of this.activity) record.rekey(ids);
    await poll(
      async () => {
        const { machines } = await this.#machines.listMachines({}, bearer(world.userToken, { deadline: 5_000 }));
        return machines.every((m) => !m.linked);
      },
      "every machine to be unlinked after the load",
      timeoutMs,
      200,
    );
    const transitions = new Map<StreamRecord, string[]>();
    for (const record of this.presence) {
      transitions.set(
        record,
        await replayTransitions(this.#machines, world.userToken, this.presenceStart.get(record)!),
      );
    }
    await poll(
      () =>
        this.presence.every((r) => {
          const t = transitions.get(r)!;
          return t.length === 0 || r.keys().includes(t.at(-1)!);
        }),
      "every machines stream to deliver the last transition",
      timeoutMs,
      200,
    ).catch(() => {});
    return { log, transitions, authors };
  }

  /** Closes every stream and client. */
  async close(): Promise<void> {
    this.#load.abort();
    this.#streams.abort();
    for (const source of this.sse) source.close();
    await Promise.all([...this.agents, ...this.stateless].map((a) => a.close()));
    await Promise.allSettled(this.#followers);
    this.#activity.close();
    this.#machines.close();
    this.#link.close();
    for (const client of this.#extra) client.close();
  }
}
