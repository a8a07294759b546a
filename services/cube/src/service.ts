import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { NoticeService } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import { AccessTokenVerifier, principalResolver } from "@unimatrix/service-kit/auth";
import { openStreamCounter, RedisStreamCounter } from "@unimatrix/service-kit/bus";
import { route } from "@unimatrix/service-kit/grpc";
import { observeFeed } from "@unimatrix/service-kit/observe";
import {
  defineService,
  type StartedService,
  type StartServiceOptions,
  startService,
} from "@unimatrix/service-kit/service";
import { rawQuery } from "@unimatrix/service-kit/store";
import { type CubeConfig, cubeEnv, readCubeConfig } from "./config";
import type { CubeDeps } from "./deps";
import { publishEffects } from "./effects";
import { activityHandlers } from "./handlers/activity";
import { cubeHandlers } from "./handlers/cube";
import { identityHandlers } from "./handlers/identity";
import { noticeHandlers } from "./handlers/notices";
import { DeliveryRecorder } from "./live/deliveries";
import { type ActivityFeed, activityFeed } from "./live/feed";
import { MachineDirectory } from "./live/machines";
import { type LivenessRound, livenessRound } from "./ops/liveness";
import { RETENTION_LEASE, type RetentionRound, retentionRound } from "./ops/retention";
import { resolveAccessToken } from "./reads/access-tokens";
import { resolveTokenCached } from "./reads/credentials";
import { closeAuthCache, openAuthCache } from "./store/auth-cache";
import { StorageGuard } from "./store/guard";
import { openPrisma } from "./store/prisma";
import { dropJobLease } from "./tables/retention";

/** The service's SQL migrations (Prisma layout), beside src/ and dist/ alike. */
export const migrationsDir = join(__dirname, "..", "prisma", "migrations");

/** The background job that runs the liveness scan every `CUBE_LIVENESS_INTERVAL_MS` (0 = off). */
export const LIVENESS_JOB = "liveness";

/** What the retention job counts per kind of row it deletes. */
const PRUNED_KINDS = ["entries", "notifications", "receipts", "notices", "acks", "claims"] as const;

/** The background job that tries the retention round every `CUBE_RETENTION_INTERVAL_MS` (0 = off); one replica holds its lease. */
const RETENTION_JOB = "retention";

/** The cube service: identity, cubes/roles/seats and the activity log over gRPC, wired in one step. */
export const cubeService = defineService<CubeConfig>({
  name: "cube",
  env: cubeEnv,
  migrationsDir,
  readConfig: readCubeConfig,
  async wire({ database, bus, logger, clock, internalKey, operatorToken, metrics, config: common }, config) {
    const prisma = openPrisma(database);
    const auth = await openAuthCache(bus, clock);
    const accessTokens = config.oidcIssuer
      ? new AccessTokenVerifier({
          issuer: config.oidcIssuer,
          audience: config.oidcAudience,
          scope: config.oidcScope,
          jwksUrl: config.oidcJwksUrl,
          clock,
          ...(config.jwksCooldownMs === undefined ? {} : { jwksCooldownMs: config.jwksCooldownMs }),
        })
      : undefined;
    const deps: CubeDeps = {
      prisma,
      fast: rawQuery(database),
      clock,
      bus,
      logger,
      config,
      internalKey,
      auth,
      guard: new StorageGuard(prisma, config.storageBudgetBytes),
      machines: new MachineDirectory(config.presenceAddressOf ?? (() => config.presenceAddress), internalKey),
      ...(accessTokens ? { accessTokens } : {}),
    };
    const feed = activityFeed(deps);
    observeFeed(metrics, feed);
    // "At most 10 open SubscribeActivity streams per credential", counted across the fleet (Redis;
    // this replica's memory on the in-process bus).
    const streams = openStreamCounter({
      url: common.redisUrl,
      prefix: common.busPrefix,
      name: "cube:activity-streams",
      logger,
    });
    const round = () => livenessRound(deps, (effects) => publishEffects(deps, effects));
    const deliveries = new DeliveryRecorder(deps);
    // This replica's name on fleet-wide job leases.
    const replicaId = randomUUID();
    const rounds = metrics.counter(
      "unimatrix_cube_retention_rounds_total",
      "Retention rounds tried on this replica: held (it held the fleet-wide lease and ran the round) or skipped.",
      ["outcome"],
    );
    const pruned = metrics.counter(
      "unimatrix_cube_retention_pruned_total",
      "Rows the retention job deleted on this replica, by kind (entries, notifications, receipts, notices, acks, claims).",
      ["kind"],
    );
    const retain = async (signal?: AbortSignal) => {
      const round = await retentionRound(deps, replicaId, signal);
      rounds.inc({ outcome: round.held ? "held" : "skipped" });
      for (const cube of round.cubes)
        for (const kind of PRUNED_KINDS) if (cube[kind] > 0) pruned.inc({ kind }, cube[kind]);
      return round;
    };
    return {
      routes: [
        route(IdentityService, identityHandlers(deps, operatorToken)),
        route(CubeService, cubeHandlers(deps)),
        route(ActivityService, activityHandlers(deps, feed, streams, deliveries)),
        route(NoticeService, noticeHandlers(deps)),
      ],
      authenticate: principalResolver({
        internalKey,
        operatorToken,
        now: () => clock.now().getTime(),
        resolveToken: async (parsed, raw) => (await resolveTokenCached(deps, parsed, raw))?.principal ?? null,
        ...(accessTokens
          ? {
              resolveAccessToken: async (raw) => (await resolveAccessToken(deps, accessTokens, raw))?.principal ?? null,
            }
          : {}),
      }),
      background: [
        { name: LIVENESS_JOB, everyMs: config.livenessIntervalMs, run: round },
        { name: RETENTION_JOB, everyMs: config.retentionIntervalMs, run: retain },
      ],
      extra: { livenessRound: round, retentionRound: retain, deps, feed },
      async close() {
        await feed.close();
        await deliveries.close();
        await closeAuthCache(auth);
        deps.machines?.close();
        if (streams instanceof RedisStreamCounter) await streams.close();
        // A stopping replica hands the retention lease over at once (best effort: it also expires).
        await dropJobLease(prisma, RETENTION_LEASE, replicaId).catch(() => {});
        await prisma.$disconnect();
      },
    };
  },
});

/** How to start the cube service: common config, port and optional shared bus, logger, clock and schema. */
export type CubeServiceOptions = Omit<StartServiceOptions<CubeConfig>, "serviceConfig"> & {
  /** Overrides of the cube service's own settings (default: read from the environment). */
  readonly cube?: Partial<CubeConfig>;
};

/** A running cube service, with a handle on its liveness scan (tests and operators run a round by hand). */
export interface RunningCube extends StartedService<CubeConfig> {
  /** Runs one liveness round now; resolves with the drone ids pinged. */
  scanLiveness(): Promise<string[]>;
  /** Runs one liveness round now; resolves with everything it did (pings, stale claims, nudges). */
  livenessRound(): Promise<LivenessRound>;
  /** Runs one retention round now (if this replica holds, or can take, the fleet-wide lease); `signal` ends it at the next step. */
  retentionRound(signal?: AbortSignal): Promise<RetentionRound>;
  /** The wired dependencies: handler- and op-level tests call handlers and ops on them without a socket. */
  readonly deps: CubeDeps;
  /** The replica's activity feed (what the ActivityService handlers are built on). */
  readonly feed: ActivityFeed;
}

/** Starts the cube service from its manifest (`startService(cubeService, ...)`), for tests, bench and the composition. */
export async function startCube(options: CubeServiceOptions): Promise<RunningCube> {
  const { cube, ...rest } = options;
  const running = await startService(cubeService, { ...rest, serviceConfig: cube });
  const round = running.extra.livenessRound as () => Promise<LivenessRound>;
  return Object.assign(running, {
    livenessRound: round,
    retentionRound: running.extra.retentionRound as (signal?: AbortSignal) => Promise<RetentionRound>,
    scanLiveness: async () => (await round()).pinged,
    deps: running.extra.deps as CubeDeps,
    feed: running.extra.feed as ActivityFeed,
  });
}
