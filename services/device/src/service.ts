import { basename, dirname, join } from "node:path";
import { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import {
  type Clock,
  type GrpcServiceOptions,
  principalResolver,
  type RunningService,
  startGrpcService,
} from "@unimatrix/service-kit";
import { type DeviceConfig, readDeviceConfig } from "./config";
import { auditHandlers } from "./handlers/audit";
import { deviceHandlers } from "./handlers/devices";
import { enrollmentHandlers } from "./handlers/enrollment";
import { placementHandlers } from "./handlers/placement";
import { NotePublisher } from "./live/notes";
import { leaseSweeper } from "./live/sweeper";
import { type Db, openDb } from "./store/db";
import { authenticateDevice } from "./store/devices";

/** The package folder: this file runs from src/ (tests) or dist/src/ (built). */
const packageDir = basename(dirname(__dirname)) === "dist" ? join(__dirname, "..", "..") : join(__dirname, "..");

/** The service's SQL migrations (Prisma layout), found from src/ and dist/src/ alike. */
export const migrationsDir = join(packageDir, "prisma", "migrations");

/** What every handler of the device service is built from. */
export interface DeviceDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly publisher: NotePublisher;
  /** Connection lease lifetime, whole seconds. */
  readonly leaseSeconds: number;
}

/** How to start the device service: config, port and optional shared bus, logger, clock and schema. */
export type DeviceServiceOptions = Omit<GrpcServiceOptions, "name" | "migrationsDir" | "wire" | "authenticate"> &
  Partial<Pick<DeviceConfig, "leaseSeconds" | "sweepMs">>;

/** A running device service. */
export interface RunningDevice extends RunningService {
  /** Runs one expired-lease sweep now (at the service clock's time); returns how many went offline. */
  sweepLeases(): Promise<number>;
}

/**
 * Starts the device service. Callers are a gateway-signed principal, the operator token, or a
 * device's own `umx_device_...` credential (resolved here); other bearer kinds are resolved by
 * their owning service and reach this one through the gateway's signed principal.
 */
export async function startDevice(options: DeviceServiceOptions): Promise<RunningDevice> {
  const config = readDeviceConfig();
  const leaseSeconds = options.leaseSeconds ?? config.leaseSeconds;
  const sweepMs = options.sweepMs ?? config.sweepMs;
  let db: Db | undefined;
  let sweep: (() => Promise<number>) | undefined;
  const running = await startGrpcService({
    ...options,
    name: "device",
    migrationsDir,
    authenticate: ({ database, internalKey, operatorToken }) => {
      db ??= openDb(database);
      const store = db;
      return principalResolver({
        internalKey,
        operatorToken,
        resolveToken: async (token) => {
          if (token.kind !== "device") return null;
          const device = await authenticateDevice(store, token);
          return device ? { kind: "device", subjectId: device.id, tenantId: device.tenant_id } : null;
        },
      });
    },
    wire: ({ host, database, bus, logger, clock }) => {
      db ??= openDb(database);
      const deps: DeviceDeps = { db, clock, publisher: new NotePublisher(bus, logger), leaseSeconds };
      host.addService(EnrollmentService, enrollmentHandlers(deps));
      host.addService(DeviceService, deviceHandlers(deps));
      host.addService(PlacementService, placementHandlers(deps));
      host.addService(AuditService, auditHandlers(deps));
      const sweeper = leaseSweeper(deps.db, clock, deps.publisher);
      sweep = () => sweeper.run();
      const timer =
        sweepMs > 0
          ? setInterval(() => {
              sweeper.run().catch((error: unknown) => logger.error({ err: error }, "lease sweep failed"));
            }, sweepMs)
          : undefined;
      timer?.unref();
      return {
        async close() {
          if (timer) clearInterval(timer);
          await sweeper.idle();
          await deps.db.$disconnect();
        },
      };
    },
  });
  return {
    ...running,
    name: running.name,
    port: running.port,
    host: running.host,
    database: running.database,
    stop: () => running.stop(),
    sweepLeases: () => (sweep ? sweep() : Promise.resolve(0)),
  };
}
