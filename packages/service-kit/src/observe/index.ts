/** `@unimatrix/service-kit/observe`: metrics (the service registry, the `/metrics` listener), call observation, tracing. */
export * from "./calls";
export * from "./deps-metrics";
export * from "./metrics";
export * from "./trace";
export * from "./tracing";
