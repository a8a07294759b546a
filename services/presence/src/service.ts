import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import {
  CredentialNewsBoard,
  type Principal,
  principalFromMessage,
  principalResolver,
} from "@unimatrix/service-kit/auth";
import { openStreamCounter, RedisStreamCounter, type StreamCounter } from "@unimatrix/service-kit/bus";
import { type CallScope, createClient, isServiceError, route, type TypedClient } from "@unimatrix/service-kit/grpc";
import { observeFeed } from "@unimatrix/service-kit/observe";
import { PageTokens } from "@unimatrix/service-kit/rules";
import {
  defineService,
  type ServiceDeps,
  type StartedService,
  type StartServiceOptions,
  startService,
} from "@unimatrix/service-kit/service";
import { rawQuery } from "@unimatrix/service-kit/store";
import { PrismaClient } from "../generated/prisma/client";
import { type PresenceConfig, presenceEnv, readPresenceConfig } from "./config";
import { linkHandlers } from "./handlers/link";
import { machineHandlers } from "./handlers/machines";
import { offerCommitted, watchFeed } from "./live/feed";
import { LinkRegistry } from "./live/links";
import { MachineAuth } from "./live/machine-auth";
import { NoticeRelays } from "./live/notice-relay";
import { type ReconcileReport, Reconciler } from "./live/reconciler";
import { watchStreamLimiter } from "./live/watch";
import { LogStore } from "./store/log";
import { MachineStore } from "./store/machines";
import { TransitionStore } from "./store/transitions";

/** The service's SQL migrations (Prisma layout), found from src/ and dist/ alike. */
export const migrationsDir = join(__dirname, "..", "prisma", "migrations");

/** How long a cube `Authenticate` may take when the caller set no deadline. */
const AUTHENTICATE_DEADLINE_MS = 5_000;

/** gRPC status code UNAUTHENTICATED (16). */
const GRPC_UNAUTHENTICATED = 16;

/** Resolves user and client bearer tokens through cube's `Authenticate` (other kinds are not presence's callers). */
function cubeResolver(
  cube: TypedClient<typeof IdentityService>,
): (raw: string, scope?: CallScope) => Promise<Principal | null> {
  return async (raw, scope) => {
    try {
      // Within the caller's remaining deadline (and cancelled with it); 5 s when it set none.
      const response = await cube.authenticate(
        { token: raw },
        { deadline: scope?.deadline ?? AUTHENTICATE_DEADLINE_MS, signal: scope?.signal },
      );
      const principal = response.principal ? principalFromMessage(response.principal) : null;
      return principal?.kind === "user" || principal?.kind === "client" ? principal : null;
    } catch (error) {
      if (isServiceError(error) && error.code === GRPC_UNAUTHENTICATED) return null;
      throw error;
    }
  };
}

/** Closes a counter that holds a connection (the Redis one). */
async function closeCounter(counter: StreamCounter): Promise<void> {
  if (counter instanceof RedisStreamCounter) await counter.close();
}

/** What a presence replica exposes to tests and drills (`StartedService.extra`). */
export interface PresenceExtra {
  /** This replica's id in link ownership rows (a fresh UUID per start). */
  readonly replicaId: string;
  readonly registry: LinkRegistry;
  readonly reconciler: Reconciler;
  /** The notice relays (absent without a cube address). */
  readonly notices: NoticeRelays | undefined;
  /** Machine token authentication and its cache. */
  readonly machineAuth: MachineAuth;
}

/**
 * The presence service: machine links, the presence log and its watch streams. `wire` is the
 * single wiring step — stores, live machinery, handlers, the authenticator and the background
 * work (lease renewal every third of the lease, reconcile) — run once per start.
 */
export const presenceService = defineService<PresenceConfig>({
  name: "presence",
  env: presenceEnv,
  migrationsDir,
  readConfig: readPresenceConfig,
  async wire(deps: ServiceDeps, settings: PresenceConfig) {
    const { bus, clock, logger } = deps;
    const replicaId = randomUUID();
    const cube = settings.cubeAddress ? createClient(IdentityService, settings.cubeAddress) : undefined;
    const resolveForeign = cube ? cubeResolver(cube) : undefined;
    // "At most N open watch streams per credential", counted across the fleet (Redis; this
    // replica's memory on the in-process bus).
    const counter = openStreamCounter({
      url: deps.config.redisUrl,
      prefix: deps.config.busPrefix,
      name: "presence:watch-streams",
      leaseMs: settings.streamLeaseMs,
      logger,
    });
    const prisma = new PrismaClient({ adapter: deps.database.adapter });
    // The hot statements (machine auth, link open/close, feed reads) skip Prisma's per-query cost.
    const fast = rawQuery(deps.database);
    const machines = new MachineStore(prisma, fast);
    // Machine tokens through a per-replica cache that credential news (a revocation) invalidates.
    const machineAuth = new MachineAuth(machines, { bus, clock, logger });
    await machineAuth.open();
    const transitions = new TransitionStore(prisma, fast);
    const logs = new LogStore(prisma, fast);
    const feed = watchFeed({
      logs,
      bus,
      logger,
      maxLagBytes: settings.watchMaxLagBytes,
      // A lost doorbell is healed by a read every heartbeat interval.
      healMs: settings.watchHeartbeatMs,
      // While the bus is down other replicas' transitions are read this often instead.
      downPollMs: settings.busDownPollMs,
    });
    observeFeed(deps.metrics, feed);
    const registry = new LinkRegistry({
      transitions,
      bus,
      clock,
      logger,
      replicaId,
      leaseMs: settings.leaseMs,
      // This replica's watchers get its own link transitions without a read or a bus round trip.
      offer: (event, position) => void offerCommitted(feed, event, position).catch(() => {}),
    });
    const reconciler = new Reconciler({ registry, transitions, bus, clock, logger, retentionMs: settings.retentionMs });
    deps.metrics.gauge("unimatrix_presence_open_links", "Machine links open on this replica now.", () => registry.size);
    const authenticate = principalResolver({
      internalKey: deps.internalKey,
      operatorToken: deps.operatorToken,
      resolveToken: async (parsed, raw, scope) => {
        if (parsed.kind === "machine") {
          const machine = await machineAuth.authenticate(parsed);
          return machine ? { kind: "machine", tenantId: machine.tenantId, subjectId: machine.id } : null;
        }
        return resolveForeign ? resolveForeign(raw, scope) : null;
      },
    });
    // Credential news (a client rotated or revoked): token-holding watch streams re-check at once.
    const news = await CredentialNewsBoard.open(bus);
    const machineService = machineHandlers({
      machines,
      machineAuth,
      registry,
      bus,
      clock,
      logger,
      pageTokens: new PageTokens(deps.internalKey, "presence.ListMachines"),
      watch: {
        feed,
        limiter: watchStreamLimiter(settings.watchMaxStreams, counter),
        logs,
        machines,
        heartbeatMs: settings.watchHeartbeatMs,
        maxLagBytes: settings.watchMaxLagBytes,
        resolveForeign,
        news,
        now: () => clock.now(),
      },
    });
    // Notices over the Link: relayed from cube's NoticeService as the machine (signed with the
    // internal key). Without a cube address there are none.
    const notices = settings.cubeAddress ? new NoticeRelays(settings.cubeAddress, deps.internalKey, logger) : undefined;
    deps.metrics.gauge(
      "unimatrix_presence_notice_relays",
      "Links on this replica relaying cube notices now.",
      () => notices?.size ?? 0,
    );
    const linkService = linkHandlers({
      registry,
      clock,
      heartbeatMs: settings.linkHeartbeatMs,
      helloTimeoutMs: settings.linkHelloTimeoutMs,
      notices,
    });
    try {
      await reconciler.run();
    } catch (error) {
      await news.close();
      await machineAuth.close();
      await closeCounter(counter);
      await notices?.close();
      cube?.close();
      await prisma.$disconnect();
      throw error;
    }
    const extra: PresenceExtra = { replicaId, registry, reconciler, notices, machineAuth };
    return {
      routes: [route(MachineService, machineService), route(LinkService, linkService)],
      authenticate,
      background: [
        {
          name: "lease renewal",
          everyMs: Math.max(1, Math.floor(settings.leaseMs / 3)),
          run: () => registry.renewLeases(),
        },
        { name: "reconcile", everyMs: settings.reconcileMs, run: () => reconciler.run() },
      ],
      extra: { ...extra },
      async close() {
        await registry.settle();
        await news.close();
        await machineAuth.close();
        await feed.close();
        await closeCounter(counter);
        await notices?.close();
        cube?.close();
        await prisma.$disconnect();
      },
    };
  },
});

/** How to start presence (tests, bench, the launcher): the kit's start options, with `presence` overrides. */
export type PresenceServiceOptions = Omit<StartServiceOptions<PresenceConfig>, "serviceConfig"> & {
  /** The presence settings; read from the environment when absent (tests override a few). */
  readonly presence?: Partial<PresenceConfig>;
  /** How often watch feeds read the database while the bus is down (default the kit's BUS_DOWN_POLL_MS). */
  readonly busDownPollMs?: number;
  /** Lease of this replica's places in the fleet-wide stream count (default 10 s; tests shorten it). */
  readonly streamLeaseMs?: number;
};

/** A running presence replica. */
export interface PresenceService extends StartedService<PresenceConfig> {
  readonly replicaId: string;
  /** This replica's notice relays (absent without a cube address): counts for tests. */
  readonly notices: NoticeRelays | undefined;
  /** This replica's machine token authentication: cache counts for tests. */
  readonly machineAuth: MachineAuth;
  /** Runs one reconcile pass now (also runs at start and every PRESENCE_RECONCILE_MS). */
  reconcile(): Promise<ReconcileReport>;
  /** Renews this replica's link leases now (also runs every third of the lease). */
  renewLeases(): Promise<void>;
  /**
   * Stops like a crashed process (tests and chaos drills): no more database writes, no closing
   * messages, leases left to expire so a surviving replica unlinks the machines.
   */
  kill(): Promise<void>;
}

/**
 * Starts one presence replica from the manifest. Its graceful `stop` (the kit's) answers
 * NOT_SERVING, waits the drain delay, then every stream gets its going-away: links keep their
 * ownership (they see the kit's ShutdownReason), so daemons reconnect to another replica within
 * the lease without a presence flap.
 */
export async function startPresence(options: PresenceServiceOptions): Promise<PresenceService> {
  const { presence, busDownPollMs, streamLeaseMs, ...start } = options;
  const serviceConfig: Partial<PresenceConfig> = {
    ...presence,
    ...(busDownPollMs === undefined ? {} : { busDownPollMs }),
    ...(streamLeaseMs === undefined ? {} : { streamLeaseMs }),
  };
  const running = await startService(presenceService, { ...start, serviceConfig });
  const live = running.extra as unknown as PresenceExtra;
  return Object.assign(running, {
    replicaId: live.replicaId,
    notices: live.notices,
    machineAuth: live.machineAuth,
    reconcile: () => live.reconciler.run(),
    renewLeases: () => live.registry.renewLeases(),
    async kill() {
      live.registry.dead = true;
      running.host.kill();
      await running.stop();
    },
  });
}
