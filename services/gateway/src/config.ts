import { accessTokenEnv } from "@unimatrix/service-kit/auth";
import { envVar, millisSchema, portSchema, registerEnv } from "@unimatrix/service-kit/config";
import { isGrpcTarget } from "@unimatrix/service-kit/grpc";
import { z } from "zod";
import { parseCidrs } from "./client-address";

const address = z
  .string()
  .refine(
    isGrpcTarget,
    "must be a gRPC target: host:port, [::1]:7001, dns:///host:port or ipv4:10.0.0.1:7001,10.0.0.2:7001",
  );
const cidrs = z.string().transform((value, ctx) => {
  try {
    return parseCidrs(value);
  } catch (error) {
    ctx.addIssue({ code: "custom", message: (error as Error).message });
    return z.NEVER;
  }
});
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
  cubeAddress: envVar(
    "CUBE_ADDRESS",
    "gRPC target of the cube service: host:port, dns:///headless-service:port (balanced over every pod) or ipv4:a:port,b:port.",
    address,
    "127.0.0.1:7001",
  ),
  deviceAddress: envVar(
    "DEVICE_ADDRESS",
    "gRPC target of the device service (same forms as CUBE_ADDRESS).",
    address,
    "127.0.0.1:7002",
  ),
  presenceAddress: envVar(
    "PRESENCE_ADDRESS",
    "gRPC target of the presence service (same forms as CUBE_ADDRESS).",
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
    "Origins allowed to use /mcp from a browser (`*` for any) besides loopback ones (`http://localhost:…`, `127.0.0.1`, `[::1]`); any other Origin gets 403, none (agents) is allowed.",
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
  trustedProxies: envVar(
    "GATEWAY_TRUSTED_PROXIES",
    "Comma-separated CIDRs of the proxies (ingress controllers) whose X-Forwarded-For is believed for the client address. Empty: the socket address is the client.",
    cidrs,
    "",
  ),
  maxStreamsPerCredential: envVar(
    "GATEWAY_MAX_STREAMS_PER_CREDENTIAL",
    "Open SSE and MCP push streams one credential may hold across every gateway replica (Redis-counted; per replica while Redis is down).",
    z.coerce.number().int().min(1),
    "10",
  ),
  streamLeaseMs: envVar(
    "GATEWAY_STREAM_LEASE_MS",
    "How long a stream's fleet-wide slot lives unless its gateway renews it (renewed at a third of this): a dead gateway's streams free themselves within it.",
    z.coerce.number().int().min(1000),
    "15000",
  ),
  mcpIdleMs: envVar(
    "GATEWAY_MCP_IDLE_MS",
    "An MCP session unused this long expires (fleet-wide); the client starts a new one.",
    millisSchema,
    "1800000",
  ),
  mcpMaxSessions: envVar(
    "GATEWAY_MCP_MAX_SESSIONS",
    "Open MCP sessions one credential may hold across every gateway replica; a further initialize answers 429.",
    z.coerce.number().int().min(1),
    "32",
  ),
  oidcClientId: envVar(
    "OIDC_CLIENT_ID",
    "Client id of the console at the identity provider (authorization code + PKCE; redirect URI <OIDC_AUDIENCE>/auth/oidc/callback). Empty: the console offers no provider sign-in.",
    z.string().max(255),
    "",
  ),
  oidcClientSecret: envVar(
    "OIDC_CLIENT_SECRET",
    "Client secret of the console at the identity provider (from a Secret). Empty: a public client (PKCE only).",
    z.string().max(1024),
    "",
  ),
  oidcProviderName: envVar(
    "OIDC_PROVIDER_NAME",
    'What the console\'s button names: "Sign in with <name>".',
    z.string().min(1).max(60),
    "your identity provider",
  ),
  // The identity provider: its access tokens are accepted (verified by cube), its metadata published, its people signed in.
  ...accessTokenEnv,
});
