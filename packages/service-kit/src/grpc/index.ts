/** `@unimatrix/service-kit/grpc`: hosting, typed clients, health, reflection, routes and the one error → status mapper. */
export { isShutdown } from "../errors";
export * from "./call";
export * from "./client";
export * from "./decode-faults";
export * from "./definition";
export * from "./field-rules";
export * from "./health";
export * from "./host";
export * from "./reflection";
export * from "./request-rules";
export * from "./route";
export * from "./status";
