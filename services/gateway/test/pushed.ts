/**
 * The message of a pushed entry: an MCP push's data is the item's text line
 * (`#41 worker-2 → all: the message`); undefined for a notification's line or a stream notice.
 */
export function entryMessage(data: unknown): string | undefined {
  if (typeof data !== "string") return undefined;
  return /^#\d+ \S+ → [^:]+: ([\s\S]*)$/.exec(data)?.[1];
}
