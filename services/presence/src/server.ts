import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { type GrpcServiceOptions, type RunningService, startGrpcService } from "@unimatrix/service-kit";
import { migrationsDir } from "./paths";

/** How to start the presence service: config, port and optional shared bus, logger, clock and schema. */
export type PresenceServiceOptions = Omit<GrpcServiceOptions, "name" | "migrationsDir" | "wire">;

/** Starts the presence service. Its RPCs are not built yet: they answer UNIMPLEMENTED; health is SERVING. */
export function startPresence(options: PresenceServiceOptions): Promise<RunningService> {
  return startGrpcService({
    ...options,
    name: "presence",
    migrationsDir,
    wire: ({ host }) => {
      host.addService(MachineService, {});
      host.addService(LinkService, {});
      return {};
    },
  });
}
