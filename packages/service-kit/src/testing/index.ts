/** `@unimatrix/service-kit/testing`: isolation (own schema, own bus prefix), callers, status checks, stream collectors, the seeder, the system starter, the span recorder, benchmark plumbing. */

export * from "./bench";
export * from "./calls";
export * from "./isolation";
export * from "./requests";
export * from "./seed";
export * from "./spans";
export * from "./spawned";
export * from "./system";
