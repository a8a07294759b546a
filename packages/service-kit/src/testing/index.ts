/** `@unimatrix/service-kit/testing`: isolation (own schema, own bus prefix), callers, status checks, stream collectors, the seeder, the system starter, benchmark plumbing. */

export * from "./bench";
export * from "./calls";
export * from "./isolation";
export * from "./seed";
export * from "./system";
