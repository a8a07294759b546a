export { type DeviceConfig, deviceEnv, readDeviceConfig } from "./config";
export { type DeviceServiceOptions, migrationsDir, type RunningDevice, startDevice } from "./service";
