import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { LinkCloseReason, LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import {
  type Authenticate,
  createClient,
  type GrpcServiceOptions,
  isServiceError,
  type Principal,
  principalFromMessage,
  principalResolver,
  type RunningService,
  type ServiceDeps,
  startGrpcService,
} from "@unimatrix/service-kit";
import { PrismaClient } from "../generated/prisma/client";
import { type PresenceConfig, readPresenceConfig } from "./config";
import { transitionSize } from "./convert";
import { linkHandlers } from "./handlers/link";
import { machineHandlers } from "./handlers/machines";
import { WatchHub } from "./live/feed";
import { StreamLimiter } from "./live/limiter";
import { LinkRegistry } from "./live/links";
import { type ReconcileReport, Reconciler } from "./live/reconciler";
import { LogStore } from "./store/log";
import { MachineStore } from "./store/machines";
import { TransitionStore } from "./store/transitions";

/** The nearest folder at or above `dir` holding a package.json (this package's root, from src/ or dist/src/). */
function packageRoot(dir: string): string {
  return existsSync(join(dir, "package.json")) || dirname(dir) === dir ? dir : packageRoot(dirname(dir));
}

/** The service's SQL migrations (Prisma layout), found from src/ and dist/src/ alike. */
export const migrationsDir = join(packageRoot(__dirname), "prisma", "migrations");

/** gRPC status code UNAUTHENTICATED (16). */
const GRPC_UNAUTHENTICATED = 16;

/** How to start the presence service: config, port and optional shared bus, logger, clock and schema. */
export type PresenceServiceOptions = Omit<GrpcServiceOptions, "name" | "migrationsDir" | "wire" | "authenticate"> & {
  /** The presence settings; read from the environment when absent (tests override a few). */
  readonly presence?: Partial<PresenceConfig>;
  /** This replica's id in link ownership rows (default: a fresh UUID per start). */
  readonly replicaId?: string;
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

/** A foreign bearer token (user/client) resolved through cube; null when it does not authenticate. */
type ResolveForeign = (raw: string) => Promise<Principal | null>;

/** Resolves user and client bearer tokens through cube's `Authenticate` (other kinds are not presence's callers). */
function cubeResolver(cube: ReturnType<typeof createClient<typeof IdentityService>>): ResolveForeign {
  return async (raw) => {
    try {
      const response = await cube.authenticate({ token: raw }, { deadline: 5_000 });
      const principal = response.principal ? principalFromMessage(response.principal) : null;
      return principal?.kind === "user" || principal?.kind === "client" ? principal : null;
    } catch (error) {
      if (isServiceError(error) && error.code === GRPC_UNAUTHENTICATED) return null;
      throw error;
    }
  };
}

/** Background work of a replica: what runs how often (the kit will own these timers). */
interface Background {
  readonly name: string;
  readonly everyMs: number;
  run(): Promise<unknown>;
}

/** What the wiring step gives back. */
interface Wired {
  readonly authenticate: Authenticate;
  readonly background: readonly Background[];
  readonly registry: LinkRegistry;
  readonly reconciler: Reconciler;
  close(): Promise<void>;
}

/**
 * The single wiring step: stores, live machinery and handlers from the deps, the routes added to
 * the host, the authenticator, and the background work.
 */
function wirePresence(
  deps: Omit<ServiceDeps, "host">,
  settings: PresenceConfig,
  replicaId: string,
): Wired & { routes(host: ServiceDeps["host"]): void } {
  const { bus, clock, logger } = deps;
  const cube = settings.cubeAddress ? createClient(IdentityService, settings.cubeAddress) : undefined;
  const resolveForeign = cube ? cubeResolver(cube) : undefined;
  // Under load a transaction may wait for a pooled connection longer than Prisma's 2 s default.
  const prisma = new PrismaClient({
    adapter: deps.database.adapter,
    transactionOptions: { maxWait: 10_000, timeout: 15_000 },
  });
  const machines = new MachineStore(prisma);
  const transitions = new TransitionStore(prisma);
  const logs = new LogStore(prisma);
  const registry = new LinkRegistry({ transitions, bus, clock, logger, replicaId, leaseMs: settings.leaseMs });
  const reconciler = new Reconciler({ registry, transitions, bus, clock, logger, retentionMs: settings.retentionMs });
  const hub = new WatchHub({ bus, logs, logger, maxLagBytes: settings.watchMaxLagBytes, sizeOf: transitionSize });
  const authenticate = principalResolver({
    internalKey: deps.internalKey,
    operatorToken: deps.operatorToken,
    resolveToken: async (parsed, raw) => {
      if (parsed.kind === "machine") {
        const machine = await machines.authenticate(parsed);
        return machine ? { kind: "machine", tenantId: machine.tenantId, subjectId: machine.id } : null;
      }
      return resolveForeign ? resolveForeign(raw) : null;
    },
  });
  const machineService = machineHandlers({
    machines,
    registry,
    bus,
    clock,
    logger,
    watch: {
      hub,
      limiter: new StreamLimiter(settings.watchMaxStreams, "WatchMachines streams"),
      logs,
      machines,
      heartbeatMs: settings.watchHeartbeatMs,
      maxLagBytes: settings.watchMaxLagBytes,
      resolveForeign,
      now: () => clock.now(),
    },
  });
  const linkService = linkHandlers({
    registry,
    clock,
    heartbeatMs: settings.linkHeartbeatMs,
    helloTimeoutMs: settings.linkHelloTimeoutMs,
  });
  return {
    authenticate,
    registry,
    reconciler,
    routes(host) {
      host.addService(MachineService, machineService);
      host.addService(LinkService, linkService);
    },
    background: [
      {
        name: "lease renewal",
        everyMs: Math.max(1, Math.floor(settings.leaseMs / 3)),
        run: () => registry.renewLeases(),
      },
      { name: "reconcile", everyMs: settings.reconcileMs, run: () => reconciler.run() },
    ],
    async close() {
      hub.close();
      cube?.close();
      await prisma.$disconnect();
    },
  };
}

/** Starts one presence replica. */
export async function startPresence(options: PresenceServiceOptions): Promise<PresenceService> {
  const settings: PresenceConfig = { ...readPresenceConfig(), ...options.presence };
  const replicaId = options.replicaId ?? randomUUID();
  let wired: ReturnType<typeof wirePresence> | undefined;
  const timers: NodeJS.Timeout[] = [];
  const stopTimers = () => {
    for (const timer of timers) clearInterval(timer);
  };
  const running = await startGrpcService({
    ...options,
    name: "presence",
    migrationsDir,
    authenticate: (deps) => {
      wired = wirePresence(deps, settings, replicaId);
      return wired.authenticate;
    },
    wire: async ({ host, logger }) => {
      const live = wired as ReturnType<typeof wirePresence>;
      live.routes(host);
      await live.reconciler.run();
      for (const work of live.background) {
        const timer = setInterval(() => {
          work.run().catch((error: unknown) => logger.warn({ err: error }, `${work.name} failed`));
        }, work.everyMs);
        timer.unref();
        timers.push(timer);
      }
      return {
        async close() {
          stopTimers();
          await live.close();
        },
      };
    },
  }).catch(async (error: unknown) => {
    stopTimers();
    await wired?.close();
    throw error;
  });
  const live = wired as ReturnType<typeof wirePresence>;
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
      // Links end with SHUTDOWN and keep their ownership: daemons reconnect to another replica
      // within the lease and replace it without a presence flap.
      stopTimers();
      live.registry.stopping = true;
      live.registry.closeAll(LinkCloseReason.SHUTDOWN);
      await running.stop();
    },
    async kill() {
      stopTimers();
      live.registry.dead = true;
      running.host.shutdown(0).catch(() => {});
      await running.stop();
    },
  };
}
