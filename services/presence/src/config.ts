import { commonEnv, envVar, millisSchema, portSchema, readConfig, registerEnv } from "@unimatrix/service-kit/config";
import { isGrpcTarget } from "@unimatrix/service-kit/grpc";

// The kit's schemas, so this package needs no direct zod dependency.
/** A positive whole number (same rule as milliseconds). */
const positiveInt = millisSchema;
/** A gRPC target grpc-js can dial (`host:port`, `[::1]:7001`, `dns:///host:port`, `ipv4:a:p,b:p`), optional. */
const optionalTarget = commonEnv.bindHost.schema
  .refine(
    isGrpcTarget,
    "must be a gRPC target: host:port, [::1]:7001, dns:///host:port or ipv4:10.0.0.1:7001,10.0.0.2:7001",
  )
  .optional();

/** Variables only the presence service reads. */
export const presenceEnv = registerEnv({
  port: envVar("PRESENCE_PORT", "gRPC port of the presence service.", portSchema, "7003"),
  metricsPort: envVar(
    "PRESENCE_METRICS_PORT",
    "Port of the presence service's Prometheus /metrics listener (never routed outside; not the public port).",
    portSchema,
    "9103",
  ),
  retentionMs: envVar(
    "PRESENCE_RETENTION_MS",
    "How long presence events are kept before reconcile prunes them and raises the tenant's floor.",
    millisSchema,
    String(7 * 24 * 3600 * 1000),
  ),
  reconcileMs: envVar(
    "PRESENCE_RECONCILE_MS",
    "Interval of the reconcile pass (held links vs presence rows, expired leases, pruning).",
    millisSchema,
    "10000",
  ),
  leaseMs: envVar(
    "PRESENCE_LINK_LEASE_MS",
    "Lease of a replica's link ownership; renewed every third of it. A dead replica's machines are unlinked once it expires.",
    millisSchema,
    "30000",
  ),
  linkHeartbeatMs: envVar(
    "PRESENCE_LINK_HEARTBEAT_MS",
    "Heartbeat interval of machine links; a link silent for 3 intervals is closed.",
    millisSchema,
    "15000",
  ),
  linkHelloTimeoutMs: envVar(
    "PRESENCE_LINK_HELLO_TIMEOUT_MS",
    "How long a new link may take to send its hello.",
    millisSchema,
    "10000",
  ),
  watchHeartbeatMs: envVar(
    "PRESENCE_WATCH_HEARTBEAT_MS",
    "Heartbeat interval of WatchMachines streams (each heartbeat also re-checks the log and the credential).",
    millisSchema,
    "15000",
  ),
  watchMaxStreams: envVar(
    "PRESENCE_WATCH_MAX_STREAMS",
    "Open WatchMachines streams allowed per credential, counted across every replica (Redis, expiring entries); per replica while Redis is down.",
    positiveInt,
    "10",
  ),
  watchMaxLagBytes: envVar(
    "PRESENCE_WATCH_MAX_LAG_BYTES",
    "A watcher this many bytes of events behind is closed with RESOURCE_EXHAUSTED.",
    positiveInt,
    String(1024 * 1024),
  ),
  cubeAddress: envVar(
    "PRESENCE_CUBE_ADDRESS",
    "gRPC target of the cube service (host:port, dns:///cube-headless:7001 for round-robin over its pods, ipv4:a:port,b:port), whose Authenticate resolves user and client bearer tokens within the caller's deadline, and whose NoticeService the links that accept notices relay. Unset: only machine tokens, the operator token and signed principals are accepted, and links carry no notices.",
    optionalTarget,
  ),
});

/** The presence service's own settings, typed. */
export type PresenceConfig = ReturnType<typeof readPresenceConfig> & {
  /** How often watch feeds read the database while the bus is down (tests; default the kit's BUS_DOWN_POLL_MS). */
  readonly busDownPollMs?: number | undefined;
  /** Lease of this replica's places in the fleet-wide watch-stream count (tests; default the kit's 10 s). */
  readonly streamLeaseMs?: number | undefined;
};

/** Reads the presence variables from the environment (throws a ConfigError naming a bad one). */
export function readPresenceConfig(env: NodeJS.ProcessEnv = process.env) {
  return readConfig(presenceEnv, env);
}
