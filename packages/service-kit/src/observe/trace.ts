/** The W3C trace context header (https://www.w3.org/TR/trace-context/). */
export const TRACEPARENT_HEADER = "traceparent";

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The trace id of a `traceparent` value, or undefined for a missing or malformed one (all-zero ids are invalid). */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  const match = traceparent ? TRACEPARENT.exec(traceparent.trim()) : null;
  if (!match || match[1] === "ff") return undefined;
  const traceId = match[2]!;
  if (/^0+$/.test(traceId) || /^0+$/.test(match[3]!)) return undefined;
  return traceId;
}
