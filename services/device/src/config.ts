import {
  type ConfigOf,
  envVar,
  millisSchema,
  portSchema,
  readConfig,
  registerEnv,
} from "@unimatrix/service-kit/config";

/** Variables only the device service reads. */
export const deviceEnv = registerEnv({
  port: envVar("DEVICE_PORT", "gRPC port of the device service.", portSchema, "7002"),
  metricsPort: envVar(
    "DEVICE_METRICS_PORT",
    "Port of the device service's Prometheus /metrics listener (never routed outside; not the public port).",
    portSchema,
    "9102",
  ),
  leaseSeconds: envVar(
    "DEVICE_LEASE_SECONDS",
    "Lifetime of a device connection lease in whole seconds (3-3600); each heartbeat extends it.",
    millisSchema.min(3).max(3600),
    "30",
  ),
  sweepMs: envVar(
    "DEVICE_LEASE_SWEEP_MS",
    "How often expired connection leases are turned offline, in milliseconds.",
    millisSchema,
    "1000",
  ),
});

/** The device service's own settings, read from the environment. */
export type DeviceConfig = ConfigOf<typeof deviceEnv>;

/** Reads the device service's variables (defaults applied, bad values refused). */
export function readDeviceConfig(env: NodeJS.ProcessEnv = process.env): DeviceConfig {
  return readConfig(deviceEnv, env);
}
