import { join } from "node:path";
import { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { principalResolver } from "@unimatrix/service-kit/auth";
import { route } from "@unimatrix/service-kit/grpc";
import {
  defineService,
  type StartedService,
  type StartServiceOptions,
  startService,
} from "@unimatrix/service-kit/service";
import { PrismaClient } from "../generated/prisma/client";
import { type DeviceConfig, deviceEnv, readDeviceConfig } from "./config";
import type { DeviceDeps } from "./deps";
import { auditHandlers } from "./handlers/audit";
import { deviceHandlers } from "./handlers/devices";
import { enrollmentHandlers } from "./handlers/enrollment";
import { placementHandlers } from "./handlers/placement";
import { NotePublisher } from "./live/notes";
import { leaseSweeper } from "./live/sweeper";
import { devicePageTokens } from "./rules/paging";
import { authenticateDevice } from "./store/devices";

/** The service's SQL migrations (Prisma layout), found from src/ and dist/ alike. */
export const migrationsDir = join(__dirname, "..", "prisma", "migrations");

/** The name of the expired-lease sweep among the service's background jobs. */
export const LEASE_SWEEP = "lease-sweep";

/**
 * The device service. Callers are a gateway-signed principal, the operator token, or a device's
 * own `umx_device_...` credential (resolved here); other bearer kinds are resolved by their owning
 * service and reach this one through the gateway's signed principal.
 */
export const deviceService = defineService<DeviceConfig>({
  name: "device",
  env: deviceEnv,
  migrationsDir,
  readConfig: readDeviceConfig,
  wire({ database, bus, logger, clock, internalKey, operatorToken }, config) {
    const db = new PrismaClient({ adapter: database.adapter });
    const deps: DeviceDeps = {
      db,
      clock,
      publisher: new NotePublisher(bus, logger),
      pages: devicePageTokens(internalKey),
      leaseSeconds: config.leaseSeconds,
    };
    const sweeper = leaseSweeper(db, clock, deps.publisher);
    return {
      routes: [
        route(EnrollmentService, enrollmentHandlers(deps)),
        route(DeviceService, deviceHandlers(deps)),
        route(PlacementService, placementHandlers(deps)),
        route(AuditService, auditHandlers(deps)),
      ],
      authenticate: principalResolver({
        internalKey,
        operatorToken,
        resolveToken: async (token) => {
          if (token.kind !== "device") return null;
          const device = await authenticateDevice(db, token);
          return device ? { kind: "device", subjectId: device.id, tenantId: device.tenant_id } : null;
        },
      }),
      background: [{ name: LEASE_SWEEP, everyMs: config.sweepMs, run: () => sweeper.run() }],
      async close() {
        await sweeper.idle();
        await db.$disconnect();
      },
    };
  },
});

/** How to start the device service alone (tests, bench): the kit's options plus the lease settings. */
export type DeviceServiceOptions = Omit<StartServiceOptions<DeviceConfig>, "serviceConfig"> &
  Partial<Pick<DeviceConfig, "leaseSeconds" | "sweepMs">>;

/** A running device service. */
export interface RunningDevice extends StartedService<DeviceConfig> {
  /** Runs one expired-lease sweep now (at the service clock's time); returns how many went offline. */
  sweepLeases(): Promise<number>;
}

/** Starts the device service from its manifest (`sweepMs: 0` schedules no sweep; run it by hand). */
export async function startDevice(options: DeviceServiceOptions): Promise<RunningDevice> {
  const { leaseSeconds, sweepMs, ...start } = options;
  const serviceConfig: Partial<DeviceConfig> = {
    ...(leaseSeconds !== undefined && { leaseSeconds }),
    ...(sweepMs !== undefined && { sweepMs }),
  };
  const started = await startService(deviceService, { ...start, serviceConfig });
  return Object.assign(started, {
    sweepLeases: () => started.runBackground(LEASE_SWEEP) as Promise<number>,
  });
}
