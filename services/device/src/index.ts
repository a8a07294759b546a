export { deviceEnv } from "./config";
export { migrationsDir } from "./paths";
export { type DeviceServiceOptions, type RunningDevice, startDevice } from "./server";
