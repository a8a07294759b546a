import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { type PageBinding, PageTokens } from "@unimatrix/service-kit/rules";

/**
 * Offset pages of one list RPC, with the kit's sealed page tokens: a token is bound to the RPC,
 * the caller's credential and the request's filters, so another caller's token, a token reused
 * with other filters, or a tampered one is INVALID_ARGUMENT naming `page_token`.
 */
export class OffsetPages {
  readonly #tokens: PageTokens;

  constructor(key: string, purpose: string) {
    this.#tokens = new PageTokens(key, purpose);
  }

  /** The offset a page token continues at (0 for the empty token: the first page). */
  offset(token: string, binding: PageBinding): number {
    const position = this.#tokens.open(token, binding);
    if (position === null) return 0;
    if (typeof position !== "number" || !Number.isSafeInteger(position) || position < 0)
      throw new InvalidArgumentError("page_token", "is malformed");
    return position;
  }

  /** A page of `rows` (read with one row more than `size`) and the token of the next page ("" after the last). */
  page<T>(rows: readonly T[], offset: number, size: number, binding: PageBinding): { rows: T[]; next: string } {
    return { rows: rows.slice(0, size), next: rows.length > size ? this.#tokens.seal(offset + size, binding) : "" };
  }
}
