import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, resolve, sep } from "node:path";

/** Where `npm run build:web` puts the console (services/gateway/dist/console), from src/ or dist/. */
const CONSOLE_DIR = resolve(__dirname, "..", "dist", "console");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".map": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

/**
 * The console's security headers: it loads only its own assets and talks only to this origin,
 * cannot be framed, and sends no referrer (the token never travels in a URL anyway).
 */
const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

/** True for the paths the console owns: `/`, `/index.html`, `/favicon.ico` and `/assets/...`. */
export function isConsolePath(path: string): boolean {
  return path === "/" || path === "/index.html" || path === "/favicon.ico" || path.startsWith("/assets/");
}

/**
 * Serves one console file with GET or HEAD. Built files under `assets/` carry a content hash in
 * their name and are cached for a year; `index.html` is always revalidated. Paths that escape the
 * folder or do not exist answer 404; a gateway whose console was never built answers 503 on `/`.
 */
export async function serveConsole(
  request: IncomingMessage,
  response: ServerResponse,
  path: string,
  root: string = CONSOLE_DIR,
): Promise<void> {
  if (request.method !== "GET" && request.method !== "HEAD") {
    response.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" });
    return void response.end("method not allowed\n");
  }
  const relative = path === "/" ? "index.html" : safeDecode(path.slice(1));
  const file = relative === undefined ? undefined : resolve(join(root, relative));
  if (file === undefined || !file.startsWith(root + sep) || relative?.includes("\0")) return notFound(response);
  let size: number;
  try {
    const info = await stat(file);
    if (!info.isFile()) return notFound(response);
    size = info.size;
  } catch {
    if (relative === "index.html") {
      response.writeHead(503, { "content-type": "text/plain; charset=utf-8" });
      return void response.end("the web console is not built: run `npm run build:web`\n");
    }
    return notFound(response);
  }
  const immutable = relative?.startsWith("assets/") === true;
  response.writeHead(200, {
    ...SECURITY_HEADERS,
    "content-type": TYPES[extname(file)] ?? "application/octet-stream",
    "content-length": size,
    "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
  });
  if (request.method === "HEAD") return void response.end();
  await new Promise<void>((done, fail) => {
    const stream = createReadStream(file);
    stream.once("error", fail);
    response.once("close", () => {
      stream.destroy();
      done();
    });
    stream.pipe(response);
  });
}

function safeDecode(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

function notFound(response: ServerResponse): void {
  response.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
  response.end("not found\n");
}
