import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { type GrpcServiceOptions, type RunningService, startGrpcService } from "@unimatrix/service-kit";
import { migrationsDir } from "./paths";

/** How to start the cube service: config, port and optional shared bus, logger, clock and schema. */
export type CubeServiceOptions = Omit<GrpcServiceOptions, "name" | "migrationsDir" | "wire">;

/** Starts the cube service. Its RPCs are not built yet: they answer UNIMPLEMENTED; health is SERVING. */
export function startCube(options: CubeServiceOptions): Promise<RunningService> {
  return startGrpcService({
    ...options,
    name: "cube",
    migrationsDir,
    wire: ({ host }) => {
      host.addService(IdentityService, {});
      host.addService(CubeService, {});
      host.addService(ActivityService, {});
      return {};
    },
  });
}
