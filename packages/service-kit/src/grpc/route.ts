import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "./call";
import type { GrpcHost } from "./host";

/** One served gRPC service: its descriptor and a FULL implementation (every RPC, streams included). */
export interface Route<S extends DescService = DescService> {
  readonly service: S;
  readonly impl: ServiceImpl<S>;
}

/** A route; typed so a missing RPC is a compile error rather than UNIMPLEMENTED at run time. */
export function route<S extends DescService>(service: S, impl: ServiceImpl<S>): Route {
  return { service, impl } as unknown as Route;
}

/** Serves every route on a host. */
export function addRoutes(host: GrpcHost, routes: readonly Route[]): void {
  for (const r of routes) host.addService(r.service, r.impl);
}
