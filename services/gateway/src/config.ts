import { envVar, portSchema, registerEnv } from "@unimatrix/service-kit";
import { z } from "zod";

const address = z.string().regex(/^[^\s:]+:\d{1,5}$/, "must be host:port");

/** Variables only the gateway reads. */
export const gatewayEnv = registerEnv({
  port: envVar("GATEWAY_PORT", "HTTP port of the gateway (Connect, SSE, MCP, health).", portSchema, "8080"),
  cubeAddress: envVar("CUBE_ADDRESS", "host:port of the cube service's gRPC endpoint.", address, "127.0.0.1:7001"),
  deviceAddress: envVar(
    "DEVICE_ADDRESS",
    "host:port of the device service's gRPC endpoint.",
    address,
    "127.0.0.1:7002",
  ),
  presenceAddress: envVar(
    "PRESENCE_ADDRESS",
    "host:port of the presence service's gRPC endpoint.",
    address,
    "127.0.0.1:7003",
  ),
});
