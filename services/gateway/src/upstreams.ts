import type { DescService } from "@bufbuild/protobuf";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";

/** Where the gateway finds the services. */
export interface UpstreamAddresses {
  readonly cubeAddress: string;
  readonly deviceAddress: string;
  readonly presenceAddress: string;
}

/** One gRPC client per service the gateway talks to. */
export interface Upstreams {
  readonly identity: TypedClient<typeof IdentityService>;
  readonly cube: TypedClient<typeof CubeService>;
  readonly activity: TypedClient<typeof ActivityService>;
  readonly enrollment: TypedClient<typeof EnrollmentService>;
  readonly device: TypedClient<typeof DeviceService>;
  readonly placement: TypedClient<typeof PlacementService>;
  readonly audit: TypedClient<typeof AuditService>;
  readonly machine: TypedClient<typeof MachineService>;
  close(): void;
}

/**
 * The RPCs reachable from outside, by service. `Authenticate` stays internal (the gateway calls it
 * itself); `LinkService.Link` is a bidirectional stream that machine daemons open over gRPC.
 */
export const PUBLIC_SERVICES: readonly { readonly service: DescService; readonly client: keyof Upstreams }[] = [
  { service: IdentityService, client: "identity" },
  { service: CubeService, client: "cube" },
  { service: ActivityService, client: "activity" },
  { service: EnrollmentService, client: "enrollment" },
  { service: DeviceService, client: "device" },
  { service: PlacementService, client: "placement" },
  { service: AuditService, client: "audit" },
  { service: MachineService, client: "machine" },
];

/** Methods never forwarded from outside. */
export const INTERNAL_METHODS = new Set(["Authenticate"]);

/** Opens the gRPC clients (channels connect lazily). */
export function openUpstreams(addresses: UpstreamAddresses): Upstreams {
  const clients = {
    identity: createClient(IdentityService, addresses.cubeAddress),
    cube: createClient(CubeService, addresses.cubeAddress),
    activity: createClient(ActivityService, addresses.cubeAddress),
    enrollment: createClient(EnrollmentService, addresses.deviceAddress),
    device: createClient(DeviceService, addresses.deviceAddress),
    placement: createClient(PlacementService, addresses.deviceAddress),
    audit: createClient(AuditService, addresses.deviceAddress),
    machine: createClient(MachineService, addresses.presenceAddress),
  };
  return {
    ...clients,
    close() {
      for (const client of Object.values(clients)) client.close();
    },
  };
}
