export { presenceEnv } from "./config";
export { type PresenceServiceOptions, startPresence } from "./server";
