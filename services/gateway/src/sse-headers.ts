/** The headers every event stream the gateway answers carries besides its content type: not cached, not buffered by a proxy, kept open. */
export const STREAM_HEADERS = {
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
} as const;
