export { deviceEnv } from "./config";
export { type DeviceServiceOptions, startDevice } from "./server";
