import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { status } from "@grpc/grpc-js";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { listenCredentialNews } from "@unimatrix/service-kit/auth";
import type { Bus } from "@unimatrix/service-kit/bus";
import { openBus } from "@unimatrix/service-kit/bus";
import { type Clock, systemClock } from "@unimatrix/service-kit/clock";
import type { ConfigOf } from "@unimatrix/service-kit/config";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";
import { createLogger, type Logger, REQUEST_ID_HEADER, requestIdFrom } from "@unimatrix/service-kit/logger";
import {
  failSpan,
  serveMetrics,
  startServerSpan,
  startTracing,
  TRACEPARENT_HEADER,
} from "@unimatrix/service-kit/observe";
import type { CommonConfig } from "@unimatrix/service-kit/service";
import { EdgeAuthenticator } from "./auth";
import { clientAddress } from "./client-address";
import type { gatewayEnv } from "./config";
import { adoptSession } from "./console-session";
import { consoleSignIn } from "./console-sign-in";
import { applyCors } from "./cors";
import { guardDecoding } from "./decode-guard";
import { CredentialDoors } from "./doors";
import { Drain } from "./drain";
import { LeaseTable } from "./fleet/leases";
import { SharedStore } from "./fleet/shared";
import { StreamCaps } from "./fleet/streams";
import { forwardingRoutes, PEER } from "./forward";
import { inbox } from "./inbox";
import { JSON_WRITE } from "./json-options";
import { mcpHandler } from "./mcp/handler";
import { McpSessionStore } from "./mcp/session-store";
import { GatewayMetrics } from "./metrics";
import {
  challengeUnauthorized,
  isResourceMetadataPath,
  protectedResourceOf,
  serveResourceMetadata,
} from "./protected-resource";
import { chargeLookup, RateLimiter } from "./rate-limit";
import { requestContextOf, withRequestContext } from "./request-context";
import { observeResponseStart, routeLabel } from "./route-metrics";
import { SharedUpstreams } from "./shared-upstream";
import { cubeEvents, machineEvents, type SseDeps } from "./sse";
import { isConsolePath, serveConsole } from "./static";
import { codeOfHttpStatus, errorJson, statusRow } from "./status-table";
import { openUpstreams } from "./upstreams";

/** How to start the gateway. */
export interface GatewayOptions {
  readonly config: CommonConfig;
  readonly gateway: ConfigOf<typeof gatewayEnv>;
  /** The key that signs principals for the services (the same `UMX_INTERNAL_KEY` they verify with). */
  readonly internalKey: string;
  /** The bus credential news arrives on and whose health `/readyz` reports; none: one is opened from the config. */
  readonly bus?: Bus;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** Port of the `/metrics` listener (0: any free port); undefined: none. Never the public port. */
  readonly metricsPort?: number;
}

/** A started gateway. */
export interface RunningGateway {
  readonly port: number;
  /** The bound metrics port, when a metrics listener runs. */
  readonly metricsPort: number | undefined;
  readonly metrics: GatewayMetrics;
  readonly auth: EdgeAuthenticator;
  stop(): Promise<void>;
}

type Check = { readonly name: string; readonly ok: boolean; readonly detail?: string };

/**
 * Starts the gateway: Connect (JSON and binary) and gRPC-Web for every public RPC, forwarded over
 * gRPC as the authenticated caller; `/healthz` (the process is up), `/readyz` (services and bus
 * answer); Prometheus `/metrics` on the separate metrics port only.
 */
export async function startGateway(options: GatewayOptions): Promise<RunningGateway> {
  const { gateway } = options;
  startTracing(); // once per process; a no-op when the composition already did
  const logger = options.logger ?? createLogger("gateway", options.config.logLevel);
  const accessLog = logger.child({ log: "access" });
  const clock = options.clock ?? systemClock;
  const metrics = new GatewayMetrics();
  const upstreams = openUpstreams(gateway);
  const store = new SharedStore({
    url: options.config.redisUrl,
    prefix: options.config.busPrefix,
    logger,
    onDegraded: (degraded) => metrics.fleetDegraded.set(degraded ? 1 : 0),
  });
  await store.settled();
  const limiter = new RateLimiter(gateway.rateLimitPerSecond, gateway.rateLimitBurst, store, () =>
    metrics.rateLimitFallbacks.inc(),
  );
  const resource = protectedResourceOf(gateway);
  const auth = new EdgeAuthenticator({
    upstreams,
    resource,
    operatorToken: options.config.operatorToken,
    cacheMs: gateway.authCacheMs,
    clock,
    chargeLookup: (lookup) => chargeLookup(limiter, lookup),
  });
  // Credential news (rotation, revocation, eviction) drops cached answers and re-checks open streams at once.
  const bus =
    options.bus ?? (await openBus({ url: options.config.redisUrl, prefix: options.config.busPrefix, logger }));
  const doors = new CredentialDoors(auth, Math.max(gateway.authCacheMs, 1_000));
  metrics.doorStats = () => doors.stats();
  const stopNews = await listenCredentialNews(bus, (tags) => void doors.news(tags));
  const caps = new StreamCaps(
    new LeaseTable(store, "streams", clock),
    gateway.maxStreamsPerCredential,
    gateway.streamLeaseMs,
  );
  const health: Record<string, TypedClient<typeof Health>> = {
    cube: createClient(Health, gateway.cubeAddress),
    device: createClient(Health, gateway.deviceAddress),
    presence: createClient(Health, gateway.presenceAddress),
  };
  const connect = connectNodeAdapter({
    routes: guardDecoding(
      forwardingRoutes({
        upstreams,
        auth,
        limiter,
        internalKey: options.internalKey,
        defaultTimeoutMs: gateway.requestTimeoutMs,
        doors,
        onStream: (delta) => metrics.openStreams.inc({ kind: "connect" }, delta),
      }),
      gateway.maxBodyBytes,
    ),
    contextValues: (request) => createContextValues().set(PEER, clientAddress(request, gateway.trustedProxies)),
    grpc: false,
    grpcWeb: true,
    connect: true,
    readMaxBytes: gateway.maxBodyBytes,
    // An unknown field or enum name is an error, never a silently dropped filter (DESIGN §10).
    jsonOptions: { ignoreUnknownFields: false, ...JSON_WRITE },
    // A path no route serves: Connect error JSON like every other refusal (Connect's own is an empty 404).
    fallback: (_request, response) => refuse(response as ServerResponse, status.NOT_FOUND, "no such route"),
  });

  // One upstream SubscribeActivity per (cube, viewer class) for SSE streams and MCP pushes from the head.
  const sharedUpstreams = new SharedUpstreams();
  metrics.sharedUpstreamStats = () => sharedUpstreams.stats();
  const sse: SseDeps = {
    upstreams,
    auth,
    limiter,
    caps,
    maxStreams: gateway.maxStreamsPerCredential,
    trusted: gateway.trustedProxies,
    internalKey: options.internalKey,
    onStream: (delta) => metrics.openStreams.inc({ kind: "sse" }, delta),
    onResume: () => metrics.upstreamResumes.inc({ kind: "sse" }),
    shared: sharedUpstreams,
    doors,
  };

  const mcp = mcpHandler({
    upstreams,
    auth,
    limiter,
    trusted: gateway.trustedProxies,
    sessions: new McpSessionStore(store, clock, options.internalKey, gateway.mcpIdleMs, gateway.mcpMaxSessions),
    internalKey: options.internalKey,
    logger,
    timeoutMs: gateway.requestTimeoutMs,
    maxBodyBytes: gateway.maxBodyBytes,
    allowedOrigins: gateway.mcpAllowedOrigins,
    onStream: (delta) => metrics.openStreams.inc({ kind: "mcp" }, delta),
    onResume: () => metrics.upstreamResumes.inc({ kind: "mcp" }),
    onSessionEvent: (event) => metrics.mcpSessions.inc({ event }),
    caps,
    maxStreams: gateway.maxStreamsPerCredential,
    shared: sharedUpstreams,
    doors,
    onToolCall: (tool, outcome) => metrics.mcpToolCalls.inc({ tool, outcome }),
    onWaitEvent: (event) => metrics.mcpWaits.inc({ event }),
  });

  const inboxDeps = {
    upstreams,
    auth,
    limiter,
    trusted: gateway.trustedProxies,
    internalKey: options.internalKey,
    timeoutMs: gateway.requestTimeoutMs,
  };
  // People sign in to the console through the provider when a console client is configured.
  const signIn = consoleSignIn(
    resource && gateway.oidcClientId
      ? {
          resource,
          clientId: gateway.oidcClientId,
          clientSecret: gateway.oidcClientSecret,
          providerName: gateway.oidcProviderName,
          internalKey: options.internalKey,
          upstreams,
          clock,
          logger,
        }
      : undefined,
  );

  const readiness = async (): Promise<Check[]> => {
    const checks = Object.entries(health).map(async ([name, client]): Promise<Check> => {
      try {
        const { status: serving } = await client.check({ service: "" }, { deadline: 1_000 });
        return {
          name,
          ok: serving === HealthCheckResponse_ServingStatus.SERVING,
          detail: HealthCheckResponse_ServingStatus[serving],
        };
      } catch (error) {
        return { name, ok: false, detail: (error as Error).message };
      }
    });
    return [...(await Promise.all(checks)), { name: "bus", ok: bus.healthy() }];
  };

  const drain = new Drain();
  const route = async (request: IncomingMessage, response: ServerResponse, path: string) => {
    if (request.method === "GET" && path === "/healthz") return json(response, 200, { status: "ok" });
    if (request.method === "GET" && path === "/readyz" && drain.draining) {
      return json(response, 503, { status: "draining", checks: [] });
    }
    if (request.method === "GET" && path === "/readyz") {
      const checks = await readiness();
      const ready = checks.every((check) => check.ok);
      return json(response, ready ? 200 : 503, { status: ready ? "ready" : "not ready", checks });
    }
    if (isResourceMetadataPath(path) && serveResourceMetadata(request, response, resource, path)) return;
    if (path.startsWith("/auth/") && (await signIn(request, response, path))) return;
    // A console call with its session cookie: the session's token is its bearer, if its CSRF header matches.
    if (!isConsolePath(path) && adoptSession(request, path, options.internalKey, clock.now().getTime()) === "csrf") {
      return refuse(response, status.PERMISSION_DENIED, "a console session call needs its x-umx-csrf header");
    }
    if (path === "/mcp") return mcp.handle(request, response);
    if (request.method === "GET" && path === "/v1/inbox") return inbox(inboxDeps, request, response);
    if (request.method === "GET" && path === "/v1/machines/events") {
      return machineEvents(sse, request, response, new URL(request.url ?? "/", "http://gateway"));
    }
    const cubeEventsPath = /^\/v1\/cubes\/([^/]+)\/events$/.exec(path);
    if (request.method === "GET" && cubeEventsPath) {
      const url = new URL(request.url ?? "/", "http://gateway");
      let cubeId: string;
      try {
        cubeId = decodeURIComponent(cubeEventsPath[1]!);
      } catch {
        return refuse(response, status.INVALID_ARGUMENT, "cube: malformed percent-encoding");
      }
      return cubeEvents(sse, request, response, cubeId, url);
    }
    if (isConsolePath(path)) return serveConsole(request, response, path);
    return connect(request, response);
  };

  const server: Server = createServer((request, response) => {
    const started = process.hrtime.bigint();
    drain.track(request, response);
    let path: string;
    try {
      path = new URL(request.url ?? "/", "http://gateway").pathname;
    } catch {
      return refuse(response, status.INVALID_ARGUMENT, "malformed request target");
    }
    const label = routeLabel(path);
    observeResponseStart(response, (seconds) =>
      metrics.responseStart.observe({ route: label, method: request.method ?? "" }, seconds),
    );
    // One SERVER span per request, continuing the caller's traceparent; the services' spans are
    // its children (what upstream calls send is this span's traceparent, not the caller's).
    const span = startServerSpan(`${request.method ?? "HTTP"} ${label}`, headerOf(request, TRACEPARENT_HEADER), {
      "http.request.method": request.method ?? "",
      "http.route": label,
    });
    // One request id for the whole request (the caller's when sane), returned and sent upstream.
    const context = requestContextOf(requestIdFrom(headerOf(request, REQUEST_ID_HEADER)), span);
    request.headers[REQUEST_ID_HEADER] = context.requestId;
    response.setHeader(REQUEST_ID_HEADER, context.requestId);
    response.once("close", () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const code = context.code ?? codeOfHttpStatus(response.statusCode);
      metrics.requests.inc({
        route: label,
        method: request.method ?? "",
        code: String(response.statusCode),
        rpc_code: code,
      });
      metrics.latency.observe({ route: label, method: request.method ?? "" }, seconds);
      span.span.setAttributes({ "http.response.status_code": response.statusCode, "rpc.connect_rpc.error_code": code });
      if (response.statusCode >= 500) failSpan(span.span, code);
      span.span.end();
      if (label === "/healthz" || label === "/readyz") return;
      accessLog.info(
        {
          route: label,
          method: request.method,
          status: response.statusCode,
          code,
          duration_ms: Math.round(seconds * 1e6) / 1e3,
          request_id: context.requestId,
          trace_id: context.traceId,
        },
        "request",
      );
    });
    // Every 401, whichever face writes it, names the resource metadata and the scope (RFC 9728 §5.1).
    challengeUnauthorized(response, resource, path);
    if (applyCors(gateway.corsOrigins, request, response)) return;
    withRequestContext(context, span, () =>
      route(request, response, path).catch((error: unknown) => {
        logger.error(
          { err: error, path, request_id: context.requestId, trace_id: context.traceId },
          "gateway request failed",
        );
        if (!response.headersSent) refuse(response, status.INTERNAL, "internal error");
        else response.destroy();
      }),
    );
  });
  server.requestTimeout = 0; // streams (SSE, MCP) stay open; unary calls carry their own deadline
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(gateway.port, options.config.bindHost, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  const metricsServer =
    options.metricsPort === undefined
      ? undefined
      : await serveMetrics(metrics.registry, options.config.bindHost, options.metricsPort);
  logger.info({ port, metricsPort: metricsServer?.port }, "gateway listening");
  let stopping: Promise<void> | undefined;
  return {
    port,
    metricsPort: metricsServer?.port,
    metrics,
    auth,
    stop() {
      // With other replicas to move to (a bus), drain first; on the in-process bus there are none.
      const drainMs = options.config.redisUrl ? options.config.drainDelayMs : 0;
      stopping ??= (async () => {
        if (drainMs > 0) {
          logger.info({ drainMs }, "draining: /readyz 503, every response closes its connection");
          await drain.run(drainMs);
        }
        void metricsServer?.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          void mcp.close();
          server.closeIdleConnections();
          setTimeout(() => server.closeAllConnections(), options.config.shutdownGraceMs).unref();
        });
      })().then(async () => {
        doors.stop();
        await stopNews().catch(() => {});
        if (!options.bus) await bus.close();
        upstreams.close();
        void store.close();
        for (const client of Object.values(health)) client.close();
      });
      return stopping;
    },
  };
}

/** A single header value (the first when repeated). */
function headerOf(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function json(response: ServerResponse, httpStatus: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(httpStatus, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  response.end(text);
}

/** The gateway's own refusal: Connect error JSON with the status table's HTTP status for `code`. */
function refuse(response: ServerResponse, code: status, message: string): void {
  json(response, statusRow(code).http, errorJson(code, message));
}
