import { InvalidArgumentError } from "@unimatrix/service-kit/errors";

/** A taxonomy: a JSON object as text within 100,000 bytes; returns its canonical text. */
export function taxonomy(field: string, value: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError(field, "must be valid JSON");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    throw new InvalidArgumentError(field, "must be a JSON object");
  return value;
}

/**
 * The message kinds a taxonomy allows: the entries of its `kinds` array (strings, or objects
 * with a `name`), the keys of its `kinds` object, or else its own top-level keys.
 */
export function taxonomyKinds(json: string): Set<string> {
  const parsed = JSON.parse(json) as Record<string, unknown>;
  const kinds = parsed.kinds;
  if (Array.isArray(kinds)) {
    return new Set(
      kinds
        .map((k) => (typeof k === "string" ? k : (k as { name?: unknown } | null)?.name))
        .filter((k): k is string => typeof k === "string"),
    );
  }
  if (kinds && typeof kinds === "object") return new Set(Object.keys(kinds));
  return new Set(Object.keys(parsed));
}
