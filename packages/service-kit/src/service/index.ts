/** `@unimatrix/service-kit/service`: a service described once (`defineService`), its one start path, its secrets, and the system starter. */
export * from "./boot";
export * from "./deps";
export * from "./manifest";
export * from "./secrets";
export * from "./system";
