/** Request checks every service shares: ids, paging, page tokens, text. */
export * from "./ids";
export * from "./page-tokens";
export * from "./paging";
export * from "./text";
