import { accessTokenEnv } from "@unimatrix/service-kit/auth";
import { envVar, millisSchema, portSchema, readConfig, registerEnv } from "@unimatrix/service-kit/config";
import { isGrpcTarget } from "@unimatrix/service-kit/grpc";
import { z } from "zod";

/** A gRPC target grpc-js can dial (`host:port`, `[::1]:7003`, `dns:///host:port`, `ipv4:a:p,b:p`), optional. */
const optionalTarget = z
  .string()
  .refine(
    isGrpcTarget,
    "must be a gRPC target: host:port, [::1]:7003, dns:///host:port or ipv4:10.0.0.1:7003,10.0.0.2:7003",
  )
  .optional();

/** Variables only the cube service reads. */
export const cubeEnv = registerEnv({
  port: envVar("CUBE_PORT", "gRPC port of the cube service.", portSchema, "7001"),
  metricsPort: envVar(
    "CUBE_METRICS_PORT",
    "Port of the cube service's Prometheus /metrics listener (never routed outside; not the public port).",
    portSchema,
    "9101",
  ),
  storageBudgetBytes: envVar(
    "CUBE_STORAGE_BUDGET_BYTES",
    "Storage budget of the cube schema in bytes; a write that would grow the database past it fails with RESOURCE_EXHAUSTED. 0 = unlimited.",
    z.coerce.number().int().min(0),
    "0",
  ),
  sessionTtlMs: envVar(
    "CUBE_DRONE_SESSION_TTL_MS",
    "How long a drone session (seat attach token) stays valid.",
    millisSchema,
    "86400000",
  ),
  livenessIntervalMs: envVar(
    "CUBE_LIVENESS_INTERVAL_MS",
    "How often each replica runs the liveness scan (0 disables the timer).",
    z.coerce.number().int().min(0),
    "60000",
  ),
  heartbeatMs: envVar(
    "CUBE_STREAM_HEARTBEAT_MS",
    "Interval of heartbeats on SubscribeActivity streams.",
    millisSchema,
    "15000",
  ),
  streamMaxBacklog: envVar(
    "CUBE_STREAM_MAX_BACKLOG",
    "Items a SubscribeActivity consumer may fall behind before it is cut off (closed SLOW_CONSUMER).",
    z.coerce.number().int().positive(),
    "2000",
  ),
  claimLeaseSeconds: envVar(
    "CUBE_CLAIM_LEASE_SECONDS",
    "Claim lease: a claim whose holder drone was silent this long (no post, ack, read, attach or RenewClaim) turns STALE at the next liveness scan.",
    z.coerce.number().int().positive(),
    "900",
  ),
  unreadNudgeSeconds: envVar(
    "CUBE_UNREAD_NUDGE_SECONDS",
    "A DIRECT entry expecting a reply that a recipient drone has not read this long after it was posted nudges that drone once (UNREAD_NUDGE, at the next liveness scan).",
    z.coerce.number().int().positive(),
    "600",
  ),
  notifyCoalesceSeconds: envVar(
    "CUBE_NOTIFY_COALESCE_SECONDS",
    "Coalescing window: a second ACK or REPLY notification from the same actor drone to the same recipient within it is not written (0 = no coalescing).",
    z.coerce.number().int().min(0),
    "30",
  ),
  retentionMaxAgeSeconds: envVar(
    "CUBE_RETENTION_MAX_AGE_SECONDS",
    "Retention by age: activity (entries, notifications, their receipts, acks, claims and notices) older than this is pruned and the cube's floor raised, except live claims, open questions and unread DIRECT entries of drones with a live session. A cube's UpdateCube retention overrides it. 0 = no age limit.",
    z.coerce.number().int().min(0).max(315360000),
    "2592000",
  ),
  retentionMaxItems: envVar(
    "CUBE_RETENTION_MAX_ITEMS",
    "Retention by count: positions more than this many behind a cube's head are pruned (with the same exceptions). A cube's UpdateCube retention overrides it. 0 = no count limit.",
    z.coerce.number().int().min(0).max(1000000000),
    "1000000",
  ),
  retentionIntervalMs: envVar(
    "CUBE_RETENTION_INTERVAL_MS",
    "How often a replica tries the retention job; one replica of the fleet at a time runs it, under a lease (0 disables the timer).",
    z.coerce.number().int().min(0),
    "300000",
  ),
  retentionBatch: envVar(
    "CUBE_RETENTION_BATCH",
    "Items the retention job deletes per statement (one short transaction each).",
    z.coerce.number().int().positive(),
    "500",
  ),
  presenceAddress: envVar(
    "CUBE_PRESENCE_ADDRESS",
    "gRPC target of the presence service (host:port, dns:///presence-headless:7003 for round-robin over its pods, ipv4:a:port,b:port), asked as the caller whether an AttachSeat machine_id is a machine of the caller's tenant (NOT_FOUND otherwise; UNAVAILABLE while presence cannot answer). Unset: machine_id is taken unchecked (cube run on its own).",
    optionalTarget,
  ),
  // The identity provider whose access tokens Authenticate and direct gRPC callers may present.
  ...accessTokenEnv,
  provisionTenant: envVar(
    "OIDC_PROVISION_TENANT",
    "Name of the tenant that people the identity provider signs in to the console become users of on their first sign-in, when linked to nothing yet. Empty: no provisioning (a user links them with LinkIdentity).",
    z.string().max(200),
    "",
  ),
  roleClaim: envVar(
    "OIDC_ROLE_CLAIM",
    "The access-token claim (a string or a list) whose values map a person to the user role at provisioning, e.g. groups or roles.",
    z.string().min(1).max(100),
    "groups",
  ),
  userGroups: envVar(
    "OIDC_USER_GROUPS",
    "Comma-separated values of OIDC_ROLE_CLAIM that give the user role (run the tenant) at provisioning. Empty: every person the provider signs in.",
    z.string().transform((value) =>
      value
        .split(",")
        .map((group) => group.trim())
        .filter(Boolean),
    ),
    "",
  ),
});

/** The cube service's own settings. */
export type CubeConfig = ReturnType<typeof readCubeConfig> & {
  /**
   * Presence's target resolved when first needed, over `presenceAddress` (the composition and
   * tests start presence after cube, on a port known only then).
   */
  readonly presenceAddressOf?: (() => string | undefined) | undefined;
  /** Least time between two fetches of the identity provider's keys for an unknown key id (default 30 s; tests shorten it). */
  readonly jwksCooldownMs?: number | undefined;
};

/** Reads the cube service's own variables from the environment. */
export function readCubeConfig(env: NodeJS.ProcessEnv = process.env) {
  return readConfig(cubeEnv, env);
}
