import { randomUUID } from "node:crypto";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import {
  type CallScope,
  createClient,
  type GrpcServiceOptions,
  isServiceError,
  openStreamCounter,
  type Principal,
  principalFromMessage,
  principalResolver,
  RedisStreamCounter,
  type RunningService,
  type StreamCounter,
  startGrpcService,
} from "@unimatrix/service-kit";
import { PrismaClient } from "../generated/prisma/client";
import { type PresenceConfig, readPresenceConfig } from "./config";
import { transitionSize } from "./handlers/convert";
import { linkHandler } from "./handlers/link";
import { machineHandlers } from "./handlers/machines";
import { watchMachinesHandler } from "./handlers/watch";
import { WatchHub } from "./live/feed";
import { LinkRegistry } from "./live/links";
import { type ReconcileReport, Reconciler } from "./live/reconciler";
import { migrationsDir } from "./paths";
import { LogStore } from "./store/log";
import { MachineStore } from "./store/machines";
import { TransitionStore } from "./store/transitions";

/** How long a cube `Authenticate` may take when the caller set no deadline. */
const AUTHENTICATE_DEADLINE_MS = 5_000;

/** gRPC status code UNAUTHENTICATED (16). */
const GRPC_UNAUTHENTICATED = 16;

/** How to start the presence service: config, port and optional shared bus, logger, clock and schema. */
export type PresenceServiceOptions = Omit<GrpcServiceOptions, "name" | "migrationsDir" | "wire" | "authenticate"> & {
  /** The presence settings; read from the environment when absent (tests override a few). */
  readonly presence?: Partial<PresenceConfig>;
  /** This replica's id in link ownership rows (default: a fresh UUID per start). */
  readonly replicaId?: string;
  /** How often watch feeds read the database while the bus is down (default BUS_DOWN_POLL_MS). */
  readonly busDownPollMs?: number;
  /** Lease of this replica's places in the fleet-wide stream count (default 10 s; tests shorten it). */
  readonly streamLeaseMs?: number;
};

/** A running presence replica. */
export interface PresenceService extends RunningService {
  readonly replicaId: string;
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

/** Closes a counter that holds a connection (the Redis one). */
async function closeCounter(counter: StreamCounter | undefined): Promise<void> {
  if (counter instanceof RedisStreamCounter) await counter.close();
}

/** A user or client principal from cube's `Authenticate`; other kinds are not presence's callers. */
function foreignPrincipal(message: Parameters<typeof principalFromMessage>[0]): Principal | null {
  const principal = principalFromMessage(message);
  return principal?.kind === "user" || principal?.kind === "client" ? principal : null;
}

/** Starts one presence replica. */
export async function startPresence(options: PresenceServiceOptions): Promise<PresenceService> {
  const settings: PresenceConfig = { ...readPresenceConfig(), ...options.presence };
  const replicaId = options.replicaId ?? randomUUID();
  const cube = settings.cubeAddress ? createClient(IdentityService, settings.cubeAddress) : undefined;
  const resolveForeign = cube
    ? async (raw: string, scope?: CallScope): Promise<Principal | null> => {
        try {
          // Within the caller's remaining deadline (and cancelled with it); 5 s when it set none.
          const response = await cube.authenticate(
            { token: raw },
            { deadline: scope?.deadline ?? AUTHENTICATE_DEADLINE_MS, signal: scope?.signal },
          );
          return response.principal ? foreignPrincipal(response.principal) : null;
        } catch (error) {
          if (isServiceError(error) && error.code === GRPC_UNAUTHENTICATED) return null;
          throw error;
        }
      }
    : undefined;
  let prisma: PrismaClient | undefined;
  let registry: LinkRegistry | undefined;
  let reconciler: Reconciler | undefined;
  let hub: WatchHub | undefined;
  let counter: StreamCounter | undefined;
  const timers: NodeJS.Timeout[] = [];
  const stopTimers = () => {
    for (const timer of timers) clearInterval(timer);
  };
  const running = await startGrpcService({
    ...options,
    name: "presence",
    migrationsDir,
    authenticate: (deps) => {
      // Under load a transaction may wait for a pooled connection longer than Prisma's 2 s default.
      prisma = new PrismaClient({
        adapter: deps.database.adapter,
        transactionOptions: { maxWait: 10_000, timeout: 15_000 },
      });
      const machines = new MachineStore(prisma);
      return principalResolver({
        internalKey: deps.internalKey,
        operatorToken: deps.operatorToken,
        resolveToken: async (parsed, raw, scope) => {
          if (parsed.kind === "machine") {
            const machine = await machines.authenticate(parsed);
            return machine ? { kind: "machine", tenantId: machine.tenantId, subjectId: machine.id } : null;
          }
          return resolveForeign ? resolveForeign(raw, scope) : null;
        },
      });
    },
    wire: async ({ host, bus, clock, logger }) => {
      // "At most N open watch streams per credential", counted across the fleet (Redis).
      counter = openStreamCounter({
        url: options.config.redisUrl,
        prefix: options.config.busPrefix,
        name: "presence:watch-streams",
        leaseMs: options.streamLeaseMs,
        logger,
      });
      const client = prisma as PrismaClient;
      const machines = new MachineStore(client);
      const transitions = new TransitionStore(client);
      const logs = new LogStore(client);
      registry = new LinkRegistry({ transitions, bus, clock, logger, replicaId, leaseMs: settings.leaseMs });
      reconciler = new Reconciler({ registry, transitions, bus, clock, logger, retentionMs: settings.retentionMs });
      hub = new WatchHub({
        bus,
        logs,
        logger,
        maxLagBytes: settings.watchMaxLagBytes,
        maxStreams: settings.watchMaxStreams,
        counter,
        sizeOf: transitionSize,
        downPollMs: options.busDownPollMs,
      });
      host.addService(MachineService, {
        ...machineHandlers({ machines, registry, bus, clock, logger }),
        watchMachines: watchMachinesHandler({
          hub,
          logs,
          machines,
          heartbeatMs: settings.watchHeartbeatMs,
          maxLagBytes: settings.watchMaxLagBytes,
          resolveForeign,
          now: () => clock.now(),
        }),
      });
      host.addService(LinkService, {
        link: linkHandler({
          registry,
          clock,
          heartbeatMs: settings.linkHeartbeatMs,
          helloTimeoutMs: settings.linkHelloTimeoutMs,
        }),
      });
      await reconciler.run();
      const every = (ms: number, what: string, fn: () => Promise<unknown>) => {
        const timer = setInterval(() => {
          fn().catch((error: unknown) => logger.warn({ err: error }, `${what} failed`));
        }, ms);
        timer.unref();
        timers.push(timer);
      };
      every(Math.max(1, Math.floor(settings.leaseMs / 3)), "lease renewal", () =>
        (registry as LinkRegistry).renewLeases(),
      );
      every(settings.reconcileMs, "reconcile", () => (reconciler as Reconciler).run());
      return {
        async close() {
          stopTimers();
          hub?.close();
          await closeCounter(counter);
          cube?.close();
          await client.$disconnect();
        },
      };
    },
  }).catch(async (error: unknown) => {
    stopTimers();
    await closeCounter(counter);
    cube?.close();
    await prisma?.$disconnect();
    throw error;
  });
  const live = { registry: registry as LinkRegistry, reconciler: reconciler as Reconciler };
  return {
    ...running,
    name: running.name,
    port: running.port,
    host: running.host,
    database: running.database,
    replicaId,
    reconcile: () => live.reconciler.run(),
    renewLeases: () => live.registry.renewLeases(),
    async stop() {
      // NOT_SERVING, the drain delay, then every stream gets its going-away: links keep their
      // ownership, so daemons reconnect to another replica within the lease without a presence flap.
      stopTimers();
      await running.stop();
    },
    async kill() {
      stopTimers();
      live.registry.dead = true;
      running.host.kill();
      await running.stop();
    },
  };
}
