import { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { type GrpcServiceOptions, type RunningService, startGrpcService } from "@unimatrix/service-kit";
import { migrationsDir } from "./paths";

/** How to start the device service: config, port and optional shared bus, logger, clock and schema. */
export type DeviceServiceOptions = Omit<GrpcServiceOptions, "name" | "migrationsDir" | "wire">;

/** Starts the device service. Its RPCs are not built yet: they answer UNIMPLEMENTED; health is SERVING. */
export function startDevice(options: DeviceServiceOptions): Promise<RunningService> {
  return startGrpcService({
    ...options,
    name: "device",
    migrationsDir,
    wire: ({ host }) => {
      host.addService(EnrollmentService, {});
      host.addService(DeviceService, {});
      host.addService(PlacementService, {});
      host.addService(AuditService, {});
      return {};
    },
  });
}
