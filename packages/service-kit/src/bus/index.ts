/** `@unimatrix/service-kit/bus`: the doorbell bus, the post-commit publish, the generic feed, the stream limiter and the bus-invalidated cache. */
export * from "./bus";
export * from "./feed";
export * from "./feed-queue";
export * from "./fleet-counter";
export * from "./invalidated-cache";
export * from "./limiter";
export * from "./publish";
