/** `@unimatrix/service-kit/auth`: principals, signed principal metadata, tokens, resolvers, the credential key. */
export * from "./access-tokens";
export * from "./credential";
export * from "./credential-news";
export * from "./principal";
export * from "./principal-message";
export * from "./resolver";
export * from "./tokens";
