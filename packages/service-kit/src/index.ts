/**
 * `@unimatrix/service-kit`: config, logger, clock, errors, request rules, and the service
 * manifest with its one start path. Hosting, stores, the bus, auth and test helpers have their
 * own subpaths: `/grpc`, `/store`, `/bus`, `/auth`, `/testing`.
 */

// transition: import from subpaths. These re-exports keep services that still import everything
// from the root compiling while they move to `/grpc`, `/store`, `/bus` and `/auth`; they go when
// nothing imports them from here.
export * from "./auth";
export * from "./bus";
export * from "./clock";
export * from "./config";
export * from "./errors";
export * from "./grpc";
export * from "./logger";
export * from "./observe/calls";
export * from "./observe/deps-metrics";
export * from "./observe/metrics";
export * from "./observe/trace";
export * from "./observe/tracing";
export * from "./rules";
export * from "./runtime";
export * from "./service";
export * from "./store";
export * from "./system";
