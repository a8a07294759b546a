/** `@unimatrix/service-kit/testing`: isolation (own schema, own bus prefix), callers, status checks, stream collectors, the seeder, the system starter. */
export * from "./calls";
export * from "./isolation";
export * from "./public-services";
export * from "./requests";
export * from "./seed";
export * from "./system";
