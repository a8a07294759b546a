import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { InvalidArgumentError } from "../errors";

/** What a page token is bound to: who asked, and with which filters. */
export interface PageBinding {
  /** The caller's credential key (`credentialKey(principal)`): another caller's token is refused. */
  readonly caller: string;
  /** The request's filters (any JSON value); a token used with other filters is refused. */
  readonly filter?: unknown;
}

/** A JSON value a page position may be. */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

const FIELD = "page_token";
const VERSION = "umx-page-1";

/** SHA-256 (base64url) of a value's JSON: the filter digest a token is bound to. */
function filterDigest(filter: unknown): string {
  return createHash("sha256")
    .update(JSON.stringify(filter ?? null))
    .digest("base64url");
}

/**
 * Opaque page tokens: `<base64url JSON position>.<HMAC>`, sealed with the internal key and bound
 * to the RPC (`purpose`), the caller and a digest of the filters. Only this installation can mint
 * one, so an opened position is trusted as written; a tampered token, another caller's, or one
 * reused with other filters is INVALID_ARGUMENT naming `page_token`.
 */
export class PageTokens {
  constructor(
    private readonly key: string,
    /** Domain separation, e.g. the RPC name: a ListCubes token is no ListRoles token. */
    private readonly purpose: string,
  ) {
    if (!key) throw new Error("PageTokens needs a key");
  }

  /** The token continuing after `position` for this caller and filter. */
  seal(position: JsonValue, binding: PageBinding): string {
    const body = Buffer.from(JSON.stringify(position)).toString("base64url");
    return `${body}.${this.#mac(body, binding).toString("base64url")}`;
  }

  /** The position of a token; null for the empty token (first page). */
  open<P extends JsonValue = JsonValue>(token: string, binding: PageBinding): P | null {
    if (token === "") return null;
    const dot = token.indexOf(".");
    if (dot <= 0 || token.length > 4_096) throw invalid();
    const body = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1), "base64url");
    const expected = this.#mac(body, binding);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
    try {
      return JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as P;
    } catch {
      throw invalid();
    }
  }

  #mac(body: string, binding: PageBinding): Buffer {
    return createHmac("sha256", this.key)
      .update([VERSION, this.purpose, binding.caller, filterDigest(binding.filter), body].join("\0"))
      .digest();
  }
}

function invalid(): InvalidArgumentError {
  return new InvalidArgumentError(FIELD, "is malformed, or was issued to another caller or for other parameters");
}
