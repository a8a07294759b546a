export { presenceEnv } from "./config";
export { migrationsDir } from "./paths";
export { type PresenceServiceOptions, startPresence } from "./server";
