import { envVar, millisSchema, portSchema, registerEnv } from "@unimatrix/service-kit";
import { z } from "zod";

const address = z.string().regex(/^[^\s:]+:\d{1,5}$/, "must be host:port");
const origins = z
  .string()
  .transform((value) =>
    value
      .split(",")
      .map((origin) => origin.trim())
      .filter(Boolean),
  )
  .pipe(
    z.array(z.union([z.literal("*"), z.string().url("each origin must be a URL such as https://app.example.com")])),
  );

/** Variables only the gateway reads. */
export const gatewayEnv = registerEnv({
  port: envVar("GATEWAY_PORT", "HTTP port of the gateway (Connect, SSE, MCP, health).", portSchema, "8080"),
  metricsPort: envVar(
    "GATEWAY_METRICS_PORT",
    "Port of the gateway's Prometheus /metrics listener (never routed outside; not the public port).",
    portSchema,
    "9100",
  ),
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
  corsOrigins: envVar(
    "GATEWAY_CORS_ORIGINS",
    "Comma-separated origins allowed to call from a browser (`*` for any). Empty: same-origin only.",
    origins,
    "",
  ),
  mcpAllowedOrigins: envVar(
    "GATEWAY_MCP_ALLOWED_ORIGINS",
    "Origins allowed to use /mcp from a browser (`*` for any); any other Origin gets 403, none (agents) is allowed.",
    origins,
    "",
  ),
  maxBodyBytes: envVar(
    "GATEWAY_MAX_BODY_BYTES",
    "Largest accepted request body (Connect and MCP), bytes.",
    z.coerce.number().int().min(1024),
    "1048576",
  ),
  rateLimitPerSecond: envVar(
    "GATEWAY_RATE_LIMIT_PER_SECOND",
    "Sustained requests per second per credential (0 turns the limit off).",
    z.coerce.number().min(0),
    "50",
  ),
  rateLimitBurst: envVar(
    "GATEWAY_RATE_LIMIT_BURST",
    "Requests a credential may make at once before the sustained rate applies.",
    z.coerce.number().int().min(1),
    "100",
  ),
  authCacheMs: envVar(
    "GATEWAY_AUTH_CACHE_MS",
    "How long a resolved token is trusted before its service is asked again (at most 5000).",
    z.coerce.number().int().min(0).max(5000),
    "5000",
  ),
  requestTimeoutMs: envVar(
    "GATEWAY_REQUEST_TIMEOUT_MS",
    "Deadline of a forwarded unary call when the caller sets none.",
    millisSchema,
    "30000",
  ),
});
