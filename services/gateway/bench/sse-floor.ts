// The SSE floor of the gateway benchmark, in its own process as the system is: a bare Node HTTP
// server holding every `GET /events` response open (a ready frame first) and writing each entry
// published on BENCH_CHANNEL to all of them, its frame (the shape of a real entry) built once. No
// auth, no gRPC hop, no per-stream cursor bookkeeping: what this machine can do to fan an entry out
// over SSE.
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { TEST_REDIS_URL } from "@unimatrix/service-kit/testing";
import { Redis } from "ioredis";

/** The JSON of one real entry (BENCH_ENTRY): every frame is a copy with its own cursor and message. */
const shape = JSON.parse(process.env.BENCH_ENTRY ?? "{}") as Record<string, unknown>;
const open = new Set<ServerResponse>();
const server = createServer((request, response) => {
  response.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
  response.write('retry: 2000\n\nevent: ready\ndata: {"cursor":"0"}\n\n');
  open.add(response);
  request.once("close", () => open.delete(response));
});
const subscriber = new Redis(TEST_REDIS_URL);
subscriber.on("message", (_channel: string, payload: string) => {
  const { cursor, message } = JSON.parse(payload) as { cursor: string; message: string };
  const frame = `event: entry\nid: ${cursor}\ndata: ${JSON.stringify({ ...shape, cursor, message })}\n\n`;
  for (const response of open) response.write(frame);
});
void subscriber
  .subscribe(process.env.BENCH_CHANNEL as string)
  .then(() =>
    server.listen(0, "127.0.0.1", () => process.stdout.write(`PORT ${(server.address() as AddressInfo).port}\n`)),
  );
process.once("SIGTERM", () => {
  for (const response of open) response.end();
  subscriber.disconnect();
  server.close(() => process.exit(0));
});
