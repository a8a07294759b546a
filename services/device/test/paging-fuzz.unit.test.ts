import { InvalidArgumentError } from "@unimatrix/service-kit";
import fc from "fast-check";
import { decodePageToken, encodePageToken, tokenBigint, tokenDate } from "../src/handlers/paging";

const RUNS = { numRuns: 400 };

function refusedOr<T>(fn: () => T): T | "refused" {
  try {
    return fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).field).toBe("page_token");
    return "refused";
  }
}

describe("fuzz: device page tokens", () => {
  const filters = fc.record({ status: fc.constantFrom("any", "active", "revoked"), owner: fc.uuid() });

  test("round-trip with the same filters; other filters, arity or made-up text are INVALID_ARGUMENT", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string(), { minLength: 1, maxLength: 3 }),
        filters,
        filters,
        fc.string(),
        (key, f, g, junk) => {
          const token = encodePageToken(key, f);
          expect(decodePageToken(token, f, key.length)).toEqual(key);
          if (JSON.stringify(f) !== JSON.stringify(g))
            expect(refusedOr(() => decodePageToken(token, g, key.length))).toBe("refused");
          expect(refusedOr(() => decodePageToken(token, f, key.length + 1))).toBe("refused");
          const made = refusedOr(() => decodePageToken(junk, f, 2));
          if (made !== "refused" && made !== null) expect(made).toHaveLength(2);
        },
      ),
      RUNS,
    );
  });

  test("token parts: dates and bigints parse or are refused, never throw anything else", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.bigInt({ min: 0n, max: 2n ** 70n }).map(String)), (part) => {
        const date = refusedOr(() => tokenDate(part));
        if (date !== "refused") expect(Number.isNaN(date.getTime())).toBe(false);
        const big = refusedOr(() => tokenBigint(part));
        if (big !== "refused") expect(big.toString()).toBe(part.replace(/^0+(?=\d)/, ""));
      }),
      RUNS,
    );
  });
});
