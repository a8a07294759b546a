/** `@unimatrix/service-kit/bus`: the doorbell bus, the post-commit publish, the generic feed and the stream limiter. */
export * from "./bus";
export * from "./feed";
export * from "./feed-queue";
export * from "./fleet-counter";
export * from "./limiter";
export * from "./publish";
