import type { DescService } from "@bufbuild/protobuf";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { NoticeService } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";

/** Every public service of the contracts, by the context that serves it (what the sweeps iterate). */
export const PUBLIC_SERVICES: Readonly<Record<"cube" | "device" | "presence", readonly DescService[]>> = {
  cube: [CubeService, ActivityService, IdentityService],
  device: [DeviceService, EnrollmentService, PlacementService, AuditService],
  presence: [MachineService, LinkService],
};

/** Every public RPC as `[context, service, method]`. */
export function publicMethods() {
  return Object.entries(PUBLIC_SERVICES).flatMap(([context, services]) =>
    services.flatMap((service) => service.methods.map((method) => ({ context, service, method }))),
  );
}

/**
 * Services only other services call (not forwarded by the gateway): cube's NoticeService, which
 * presence calls as the machine of a Link. The sweeps cover them over gRPC.
 */
const INTERNAL_SERVICES: Readonly<Record<"cube", readonly DescService[]>> = {
  cube: [NoticeService],
};

/** Every internal RPC as `[context, service, method]`. */
export function internalMethods() {
  return Object.entries(INTERNAL_SERVICES).flatMap(([context, services]) =>
    services.flatMap((service) => service.methods.map((method) => ({ context, service, method }))),
  );
}
