import { InvalidArgumentError } from "../errors";

/** Limits of a text field. */
export interface TextRule {
  /** Largest UTF-8 size in bytes. */
  readonly maxBytes: number;
  /** Whether empty (or whitespace-only) text is allowed (default false). */
  readonly optional?: boolean;
  /** Whether newlines and tabs are allowed (default true); other control characters never are. */
  readonly multiline?: boolean;
}

/** A C0 control other than tab, newline and carriage return; DEL; or a C1 control. */
function hasControl(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
}
const LINE_BREAK = /[\t\n\r]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Request text: within `maxBytes` UTF-8 bytes, non-empty unless optional, without NUL or other
 * control characters (newline and tab allowed unless `multiline: false`), and well-formed
 * (no lone surrogates). INVALID_ARGUMENT naming `field` otherwise.
 */
export function requireText(field: string, value: string, rule: TextRule): string {
  if (!rule.optional && value.trim().length === 0) throw new InvalidArgumentError(field, "is required");
  if (hasControl(value)) throw new InvalidArgumentError(field, "must not contain control characters");
  if (rule.multiline === false && LINE_BREAK.test(value))
    throw new InvalidArgumentError(field, "must be a single line");
  if (LONE_SURROGATE.test(value)) throw new InvalidArgumentError(field, "must be valid Unicode text");
  if (Buffer.byteLength(value, "utf8") > rule.maxBytes)
    throw new InvalidArgumentError(field, `must be at most ${rule.maxBytes.toLocaleString("en-US")} bytes`);
  return value;
}
