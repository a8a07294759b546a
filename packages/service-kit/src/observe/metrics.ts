import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** Labels of every per-RPC series (the conventional go-grpc-prometheus names). */
type RpcLabel = "grpc_service" | "grpc_method" | "grpc_type";

/** Buckets of `grpc_server_handling_seconds`: 0.5 ms … 10 s. */
const HANDLING_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * One process's (or one embedded service's) Prometheus metrics: Node's default metrics and the
 * RED series of every RPC it serves, on a registry of its own so services sharing a process keep
 * their series apart. Label sets are bounded: service and method come from the contract.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly started: Counter<RpcLabel>;
  readonly handled: Counter<RpcLabel | "grpc_code">;
  readonly handling: Histogram<RpcLabel>;
  readonly sent: Counter<RpcLabel>;
  /**
   * Stream messages counted since the last scrape, per method (`sentTally`): a stream counts each
   * message with `tally.n += 1`, and the scrape adds them to `grpc_server_msg_sent_total`. A
   * prom-client `inc` hashes its labels and walks its hash map on every call: ~5 % of a fan-out's
   * CPU per delivery (1,000 streams, profiled).
   */
  readonly #sentTallies = new Map<string, { readonly labels: Record<RpcLabel, string>; n: number }>();
  readonly received: Counter<RpcLabel>;
  /** Streams open now, by method. */
  readonly openStreams: Gauge<RpcLabel>;

  constructor(service: string) {
    this.registry.setDefaultLabels({ service });
    collectDefaultMetrics({ register: this.registry });
    const registers = [this.registry];
    const labelNames = ["grpc_service", "grpc_method", "grpc_type"] as const;
    this.started = new Counter({
      name: "grpc_server_started_total",
      help: "RPCs started on the server.",
      labelNames,
      registers,
    });
    this.handled = new Counter({
      name: "grpc_server_handled_total",
      help: "RPCs completed on the server, by status code.",
      labelNames: [...labelNames, "grpc_code"] as const,
      registers,
    });
    this.handling = new Histogram({
      name: "grpc_server_handling_seconds",
      help: "Time from the start of an RPC to its status, seconds.",
      labelNames,
      buckets: HANDLING_BUCKETS,
      registers,
    });
    const tallies = this.#sentTallies;
    this.sent = new Counter({
      name: "grpc_server_msg_sent_total",
      help: "Stream messages sent by the server.",
      labelNames,
      registers,
      collect() {
        for (const tally of tallies.values()) {
          if (tally.n === 0) continue;
          this.inc(tally.labels, tally.n);
          tally.n = 0;
        }
      },
    });
    this.received = new Counter({
      name: "grpc_server_msg_received_total",
      help: "Stream messages received by the server.",
      labelNames,
      registers,
    });
    this.openStreams = new Gauge({
      name: "grpc_server_open_streams",
      help: "Streaming RPCs open now.",
      labelNames,
      registers,
    });
  }

  /** The tally of stream messages a method sent (`n += 1` per message; added to `grpc_server_msg_sent_total` at scrape). */
  sentTally(labels: Record<RpcLabel, string>): { n: number } {
    const key = `${labels.grpc_service}/${labels.grpc_method}/${labels.grpc_type}`;
    let tally = this.#sentTallies.get(key);
    if (!tally) {
      tally = { labels, n: 0 };
      this.#sentTallies.set(key, tally);
    }
    return tally;
  }

  /** A gauge of this registry read at scrape time (open links, feed lag, pool use…). */
  gauge(name: string, help: string, collect: () => number): Gauge {
    return new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(collect());
      },
    });
  }

  /** A counter read at scrape time from a cumulative count kept elsewhere (bus failures, feed cuts…). */
  counterFrom(name: string, help: string, read: () => number): Counter {
    return new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  }

  /** A counter of this registry, created once per name (bus failures, reconnects…). */
  counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    const existing = this.registry.getSingleMetric(name);
    if (existing) return existing as Counter<L>;
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }
}

/** A running `/metrics` listener. */
export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (the Prometheus text format) of a registry on a port of its own — never
 * the public one, so nothing routed to the outside exposes it. Anything else is 404.
 */
export async function serveMetrics(registry: Registry, host: string, port: number): Promise<MetricsServer> {
  const merged = registry;
  const server: Server = createServer((request, response) => {
    if (request.method !== "GET" || request.url?.split("?")[0] !== "/metrics") {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    merged.metrics().then(
      (body) => response.writeHead(200, { "content-type": merged.contentType }).end(body),
      (error: unknown) =>
        response.writeHead(500, { "content-type": "text/plain" }).end(`${(error as Error).message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
