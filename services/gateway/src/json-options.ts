import type { JsonWriteOptions } from "@bufbuild/protobuf";

/**
 * How the gateway writes a protobuf message as JSON for programs: Connect JSON answers and SSE
 * `data:` (MCP pushes, read by models that pay per character, leave defaults out). Fields at their defaults are written too (`false`,
 * `0`, `""`, `[]`, an enum's zero name), so a failed heartbeat reads `{"ok": false}`, not `{}`;
 * an unset message field (or `optional` scalar) stays out, since its absence means something.
 */
export const JSON_WRITE = { alwaysEmitImplicit: true } as const satisfies Partial<JsonWriteOptions>;
