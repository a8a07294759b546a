import { InvalidArgumentError } from "@unimatrix/service-kit";
import fc from "fast-check";
import { decodeCursor, encodeCursor } from "../src/cursor";
import { decodePageToken, encodePageToken } from "../src/validate";

const RUNS = { numRuns: 400 };
const uuid = fc.uuid().map((u) => u.toLowerCase());
const position = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });

/** Runs `fn`; returns its value, or "refused" for INVALID_ARGUMENT naming `field`; anything else fails. */
function outcome<T>(fn: () => T, field: string): T | "refused" {
  try {
    return fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).field).toBe(field);
    return "refused";
  }
}

describe("fuzz: activity cursors", () => {
  test("round-trip; safe as an SSE id; another cube's cursor is refused", () => {
    fc.assert(
      fc.property(uuid, uuid, position, (cube, other, at) => {
        const cursor = encodeCursor(cube, at);
        expect(cursor).toMatch(/^a[A-Za-z0-9_-]+$/);
        expect(decodeCursor("after", cube, cursor)).toBe(at);
        if (other !== cube) expect(outcome(() => decodeCursor("after", other, cursor), "after")).toBe("refused");
      }),
      RUNS,
    );
  });

  test("any text (as a Last-Event-ID would bring) decodes to a position or INVALID_ARGUMENT naming the field", () => {
    fc.assert(
      fc.property(
        uuid,
        fc.oneof(
          fc.string(),
          fc.base64String().map((s) => `a${s}`),
          fc.string({ unit: "binary" }),
        ),
        (cube, text) => {
          const result = outcome(() => decodeCursor("cursor", cube, text), "cursor");
          if (result !== "refused") expect(encodeCursor(cube, result) === text || text === "").toBe(true);
        },
      ),
      RUNS,
    );
  });
});

describe("fuzz: cube page tokens", () => {
  test("round-trip for their own list; refused for another list or when made up", () => {
    fc.assert(
      fc.property(fc.nat(), fc.string(), fc.string(), fc.string(), (offset, scope, otherScope, junk) => {
        const token = encodePageToken(offset, scope);
        expect(decodePageToken(token, scope)).toBe(offset);
        if (otherScope !== scope)
          expect(outcome(() => decodePageToken(token, otherScope), "page_token")).toBe("refused");
        const made = outcome(() => decodePageToken(junk, scope), "page_token");
        if (made !== "refused") expect(Number.isSafeInteger(made) && made >= 0).toBe(true);
      }),
      RUNS,
    );
  });
});
