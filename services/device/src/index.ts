export { deviceEnv } from "./config";
export { type DeviceServiceOptions, type RunningDevice, startDevice } from "./server";
