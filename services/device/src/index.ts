export { type DeviceConfig, deviceEnv, readDeviceConfig } from "./config";
export {
  type DeviceServiceOptions,
  deviceService,
  LEASE_SWEEP,
  migrationsDir,
  type RunningDevice,
  startDevice,
} from "./service";
