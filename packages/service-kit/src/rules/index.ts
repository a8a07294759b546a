/** `@unimatrix/service-kit/rules`: request checks every service shares: ids, paging, sealed page tokens. */
export * from "./ids";
export * from "./page-tokens";
export * from "./paging";
