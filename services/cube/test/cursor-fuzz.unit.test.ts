import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import fc from "fast-check";
import { decodeCursor, encodeCursor } from "../src/rules/cursor";
import { OffsetPages } from "../src/rules/paging";

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

describe("fuzz: cube page tokens (OffsetPages over the kit's sealed tokens)", () => {
  const pages = new OffsetPages("fuzz-key-0123456789abcdef", "unimatrix.cube.v1.CubeService/ListCubes");
  const other = new OffsetPages("fuzz-key-0123456789abcdef", "unimatrix.cube.v1.IdentityService/ListRoles");
  const binding = fc.record({ caller: fc.string(), filter: fc.option(fc.string()) });

  test("round-trip for their own list, caller and filter; refused for another list, caller, filter or made up", () => {
    fc.assert(
      fc.property(fc.nat(), binding, binding, fc.string(), (offset, mine, theirs, junk) => {
        const { next } = pages.page(Array.from({ length: 2 }), offset, 1, mine);
        expect(pages.offset(next, mine)).toBe(offset + 1);
        expect(outcome(() => other.offset(next, mine), "page_token")).toBe("refused");
        if (JSON.stringify(theirs) !== JSON.stringify(mine))
          expect(outcome(() => pages.offset(next, theirs), "page_token")).toBe("refused");
        const made = outcome(() => pages.offset(junk, mine), "page_token");
        if (made !== "refused") expect(junk).toBe("");
      }),
      RUNS,
    );
  });
});
