import { envVar, portSchema, registerEnv } from "@unimatrix/service-kit";

/** Variables only the presence service reads. */
export const presenceEnv = registerEnv({
  port: envVar("PRESENCE_PORT", "gRPC port of the presence service.", portSchema, "7003"),
});
