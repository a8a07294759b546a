import type { IncomingMessage, ServerResponse } from "node:http";
import { cors } from "@connectrpc/connect";

const ALLOWED_HEADERS = [...cors.allowedHeaders, "Authorization", "Last-Event-ID", "Mcp-Session-Id", "X-Request-Id"];
const EXPOSED_HEADERS = [...cors.exposedHeaders, "Mcp-Session-Id", "X-Request-Id"];

/**
 * Applies the CORS allow-list. Returns true when the request was a preflight and is answered.
 * Origins not on the list get no CORS headers, so the browser refuses the response.
 */
export function applyCors(allowed: readonly string[], request: IncomingMessage, response: ServerResponse): boolean {
  const origin = request.headers.origin;
  const ok = origin !== undefined && (allowed.includes("*") || allowed.includes(origin));
  if (ok) {
    response.setHeader("Access-Control-Allow-Origin", origin);
    response.setHeader("Vary", "Origin");
    response.setHeader("Access-Control-Expose-Headers", EXPOSED_HEADERS.join(", "));
  }
  if (request.method !== "OPTIONS" || request.headers["access-control-request-method"] === undefined) return false;
  if (ok) {
    response.setHeader("Access-Control-Allow-Methods", [...cors.allowedMethods, "DELETE"].join(", "));
    response.setHeader("Access-Control-Allow-Headers", ALLOWED_HEADERS.join(", "));
    response.setHeader("Access-Control-Max-Age", "7200");
  }
  response.writeHead(ok ? 204 : 403).end();
  return true;
}
