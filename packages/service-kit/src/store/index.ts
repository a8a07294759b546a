/** `@unimatrix/service-kit/store`: databases, migrations, transactions and store errors. */
export { StoreAnomalyError } from "../errors";
export * from "./database";
export { EMBEDDED_STORE_DIR, formerEmbeddedStores, prepareEmbeddedTemplate } from "./embedded";
export * from "./migrations";
export * from "./sql";
export * from "./transaction";
export * from "./unavailable";
export * from "./unique";
