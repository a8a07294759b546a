import { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import {
  type Database,
  type GrpcServiceOptions,
  principalResolver,
  type RunningService,
  readConfig,
  startGrpcService,
} from "@unimatrix/service-kit";
import { deviceEnv } from "./config";
import { NotePublisher } from "./events";
import { auditHandlers } from "./handlers/audit";
import type { HandlerDeps } from "./handlers/deps";
import { deviceHandlers } from "./handlers/devices";
import { enrollmentHandlers } from "./handlers/enrollment";
import { placementHandlers } from "./handlers/placement";
import { migrationsDir } from "./paths";
import { type Db, openDb } from "./store/db";
import { authenticateDevice } from "./store/devices";
import { sweepExpiredLeases } from "./store/leases";

/** How to start the device service: config, port and optional shared bus, logger, clock and schema. */
export type DeviceServiceOptions = Omit<GrpcServiceOptions, "name" | "migrationsDir" | "wire" | "authenticate"> & {
  /** Connection lease lifetime in whole seconds (default: DEVICE_LEASE_SECONDS). */
  readonly leaseSeconds?: number;
  /** Interval of the expired-lease sweep in ms (default: DEVICE_LEASE_SWEEP_MS); 0 turns it off. */
  readonly sweepMs?: number;
};

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
  const env = readConfig(deviceEnv);
  const leaseSeconds = options.leaseSeconds ?? env.leaseSeconds;
  const sweepMs = options.sweepMs ?? env.sweepMs;
  let db: Db | undefined;
  const dbOf = (database: Database) => {
    db ??= openDb(database);
    return db;
  };
  let sweep: (() => Promise<number>) | undefined;
  const running = await startGrpcService({
    ...options,
    name: "device",
    migrationsDir,
    authenticate: ({ database, internalKey, operatorToken }) =>
      principalResolver({
        internalKey,
        operatorToken,
        resolveToken: async (token) => {
          if (token.kind !== "device") return null;
          const device = await authenticateDevice(dbOf(database), token);
          return device ? { kind: "device", subjectId: device.id, tenantId: device.tenant_id } : null;
        },
      }),
    wire: ({ host, database, bus, logger, clock }) => {
      const deps: HandlerDeps = {
        db: dbOf(database),
        clock,
        publisher: new NotePublisher(bus, logger),
        leaseSeconds,
      };
      host.addService(EnrollmentService, enrollmentHandlers(deps));
      host.addService(DeviceService, deviceHandlers(deps));
      host.addService(PlacementService, placementHandlers(deps));
      host.addService(AuditService, auditHandlers(deps));
      let sweeping: Promise<number> | undefined;
      sweep = () => {
        sweeping ??= (async () => {
          try {
            const notes = await sweepExpiredLeases(deps.db, clock.now());
            await deps.publisher.publish(notes);
            return notes.length;
          } finally {
            sweeping = undefined;
          }
        })();
        return sweeping;
      };
      const timer =
        sweepMs > 0
          ? setInterval(() => {
              sweep?.().catch((error: unknown) => logger.error({ err: error }, "lease sweep failed"));
            }, sweepMs)
          : undefined;
      timer?.unref();
      return {
        async close() {
          if (timer) clearInterval(timer);
          await sweeping?.catch(() => 0);
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
