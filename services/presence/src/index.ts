export { type PresenceConfig, presenceEnv, readPresenceConfig } from "./config";
export { migrationsDir, type PresenceService, type PresenceServiceOptions, startPresence } from "./service";
