import { envVar, portSchema, registerEnv } from "@unimatrix/service-kit";

/** Variables only the cube service reads. */
export const cubeEnv = registerEnv({
  port: envVar("CUBE_PORT", "gRPC port of the cube service.", portSchema, "7001"),
});
