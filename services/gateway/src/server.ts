import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import {
  type Bus,
  type CommonConfig,
  type ConfigOf,
  createClient,
  createLogger,
  type Logger,
  type TypedClient,
} from "@unimatrix/service-kit";
import type { gatewayEnv } from "./config";

/** How to start the gateway. */
export interface GatewayOptions {
  readonly config: CommonConfig;
  readonly gateway: ConfigOf<typeof gatewayEnv>;
  /** The bus whose health `/readyz` reports (the gateway subscribes to it for live views). */
  readonly bus?: Bus;
  readonly logger?: Logger;
}

/** A started gateway. */
export interface RunningGateway {
  readonly port: number;
  stop(): Promise<void>;
}

type Check = { readonly name: string; readonly ok: boolean; readonly detail?: string };

/** Starts the gateway: `/healthz` (the process is up) and `/readyz` (services and bus answer). */
export async function startGateway(options: GatewayOptions): Promise<RunningGateway> {
  const logger = options.logger ?? createLogger("gateway", options.config.logLevel);
  const upstreams: Record<string, TypedClient<typeof Health>> = {
    cube: createClient(Health, options.gateway.cubeAddress),
    device: createClient(Health, options.gateway.deviceAddress),
    presence: createClient(Health, options.gateway.presenceAddress),
  };

  const readiness = async (): Promise<Check[]> => {
    const checks = Object.entries(upstreams).map(async ([name, client]): Promise<Check> => {
      try {
        const { status } = await client.check({ service: "" }, { deadline: 1_000 });
        const ok = status === HealthCheckResponse_ServingStatus.SERVING;
        return { name, ok, detail: HealthCheckResponse_ServingStatus[status] };
      } catch (error) {
        return { name, ok: false, detail: (error as Error).message };
      }
    });
    const bus: Check = { name: "bus", ok: options.bus?.healthy() ?? true };
    return [...(await Promise.all(checks)), bus];
  };

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const path = new URL(request.url ?? "/", "http://gateway").pathname;
    if (request.method === "GET" && path === "/healthz") return json(response, 200, { status: "ok" });
    if (request.method === "GET" && path === "/readyz") {
      const checks = await readiness();
      const ready = checks.every((check) => check.ok);
      return json(response, ready ? 200 : 503, { status: ready ? "ready" : "not ready", checks });
    }
    return json(response, 404, { code: "not_found", message: `no route for ${request.method} ${path}` });
  };

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      logger.error({ err: error }, "gateway request failed");
      if (!response.headersSent) json(response, 500, { code: "internal", message: "internal error" });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.gateway.port, options.config.bindHost, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port }, "gateway listening");
  let stopping: Promise<void> | undefined;
  return {
    port,
    stop() {
      stopping ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), options.config.shutdownGraceMs).unref();
      }).then(() => {
        for (const client of Object.values(upstreams)) client.close();
      });
      return stopping;
    },
  };
}

function json(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  response.end(text);
}
