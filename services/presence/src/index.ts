export { type PresenceConfig, presenceEnv, readPresenceConfig } from "./config";
export {
  migrationsDir,
  type PresenceExtra,
  type PresenceService,
  type PresenceServiceOptions,
  presenceService,
  startPresence,
} from "./service";
