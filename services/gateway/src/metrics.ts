import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** Buckets of the gateway's time histograms: 0.5 ms … 10 s. */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * The gateway's Prometheus metrics, on a registry of its own (several gateways may share a
 * process): Node's default metrics (memory, handles, event loop) like every service, and its own.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
  readonly requests = new Counter({
    name: "unimatrix_gateway_requests_total",
    help: "Requests answered, by route, method, HTTP status and Connect/gRPC code (rpc_code).",
    labelNames: ["route", "method", "code", "rpc_code"] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: "unimatrix_gateway_request_duration_seconds",
    help: "Time to answer a request (to the end of the response), by route and method.",
    labelNames: ["route", "method"] as const,
    buckets: BUCKETS,
    registers: [this.registry],
  });
  readonly responseStart = new Histogram({
    name: "unimatrix_gateway_response_start_seconds",
    help: "Time until a response's status and headers are written (for SSE and MCP streams: until the stream opens), by route and method.",
    labelNames: ["route", "method"] as const,
    buckets: BUCKETS,
    registers: [this.registry],
  });
  readonly openStreams = new Gauge({
    name: "unimatrix_gateway_open_streams",
    help: "Streams open now, by kind (connect, sse, mcp).",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly mcpSessions = new Counter({
    name: "unimatrix_gateway_mcp_sessions_total",
    help: "MCP sessions by event on this replica: opened, closed (DELETE), refused (the credential holds too many).",
    labelNames: ["event"] as const,
    registers: [this.registry],
  });
  readonly mcpToolCalls = new Counter({
    name: "unimatrix_gateway_mcp_tool_calls_total",
    help: "MCP tool calls, by tool (the thirteen) and outcome (ok, or the lower-case gRPC code of the refusal).",
    labelNames: ["tool", "outcome"] as const,
    registers: [this.registry],
  });
  readonly mcpWaits = new Counter({
    name: "unimatrix_gateway_mcp_wait_events_total",
    help: "What log_wait calls saw: listening (a wait follows the cube), passed (an item that did not end a wait), woken.",
    labelNames: ["event"] as const,
    registers: [this.registry],
  });
  readonly fleetDegraded = new Gauge({
    name: "unimatrix_gateway_fleet_degraded",
    help: "1 while Redis is unreachable and rate limits, stream caps and MCP sessions count on this replica only.",
    registers: [this.registry],
  });
  readonly rateLimitFallbacks = new Counter({
    name: "unimatrix_gateway_rate_limit_fallbacks_total",
    help: "Requests whose rate limit was counted by this replica's in-memory insurance limiter (Redis unreachable).",
    registers: [this.registry],
  });
  /** Set by the server: reads the shared upstream subscriptions at scrape time. */
  sharedUpstreamStats: (() => { upstreams: number; members: number }) | undefined;
  readonly sharedUpstreams = new Gauge({
    name: "unimatrix_gateway_shared_upstreams",
    help: "Shared upstream SubscribeActivity streams open now (kind=upstreams) and the SSE streams reading them (kind=members).",
    labelNames: ["kind"] as const,
    registers: [this.registry],
    collect: () => {
      const stats = this.sharedUpstreamStats?.();
      this.sharedUpstreams.set({ kind: "upstreams" }, stats?.upstreams ?? 0);
      this.sharedUpstreams.set({ kind: "members" }, stats?.members ?? 0);
    },
  });
  readonly upstreamResumes = new Counter({
    name: "unimatrix_gateway_upstream_resumes_total",
    help: "Upstream streams re-opened from their last cursor after a replica went away, by kind (sse, mcp).",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  /** Set by the server: reads the credential doors at scrape time. */
  doorStats: (() => { closed: number; checks: number }) | undefined;
  readonly revokedStreams = new Gauge({
    name: "unimatrix_gateway_streams_revoked",
    help: "Open streams this replica closed because their credential stopped authenticating (kind=closed, a running total) and the credential re-checks it ran (kind=checks).",
    labelNames: ["kind"] as const,
    registers: [this.registry],
    collect: () => {
      const stats = this.doorStats?.();
      this.revokedStreams.set({ kind: "closed" }, stats?.closed ?? 0);
      this.revokedStreams.set({ kind: "checks" }, stats?.checks ?? 0);
    },
  });
}
