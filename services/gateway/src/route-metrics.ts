import type { ServerResponse } from "node:http";
import { PUBLIC_SERVICES } from "./upstreams";

// What the gateway's request metrics are labelled and timed by.

/** The Connect paths of the public RPCs: the only paths kept as metric labels. */
const PUBLIC_PATHS = new Set(
  PUBLIC_SERVICES.flatMap(({ service }) => service.methods.map((method) => `/${service.typeName}/${method.name}`)),
);

/** A bounded metrics label for a path: public Connect paths are kept, others folded. */
export function routeLabel(path: string): string {
  if (PUBLIC_PATHS.has(path)) return path;
  if (path === "/healthz" || path === "/readyz" || path === "/mcp") return path;
  if (/^\/v1\/cubes\/[^/]+\/events$/.test(path)) return "/v1/cubes/{cube}/events";
  if (path === "/v1/machines/events" || path === "/v1/inbox") return path;
  return "other";
}

/**
 * Calls `observe` with the seconds until the response's status and headers are written (Node
 * writes implicit headers through `writeHead` too): for a stream, the time it took to open.
 */
export function observeResponseStart(response: ServerResponse, observe: (seconds: number) => void): void {
  const began = process.hrtime.bigint();
  const writeHead = response.writeHead;
  response.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    response.writeHead = writeHead;
    observe(Number(process.hrtime.bigint() - began) / 1e9);
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as typeof writeHead;
}
