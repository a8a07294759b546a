import { envVar, portSchema, registerEnv } from "@unimatrix/service-kit";

/** Variables only the device service reads. */
export const deviceEnv = registerEnv({
  port: envVar("DEVICE_PORT", "gRPC port of the device service.", portSchema, "7002"),
});
