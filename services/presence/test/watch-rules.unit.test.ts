import { status } from "@grpc/grpc-js";
import { DomainError, InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { MAX_CURSOR, parseCursor, watchStart } from "../src/rules/watch";

/** The error `fn` throws, as code and message. */
function failure(fn: () => unknown): { code: number; message: string } {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error("expected a failure");
}

describe("parseCursor", () => {
  test("empty means no cursor", () => {
    expect(parseCursor("")).toBeNull();
  });

  test("decimal digits are the cursor", () => {
    expect(parseCursor("0")).toBe(0n);
    expect(parseCursor("42")).toBe(42n);
    expect(parseCursor("007")).toBe(7n);
    expect(parseCursor("9223372036854775807")).toBe(MAX_CURSOR);
  });

  test("beyond int64 is clamped to the largest cursor (above any head), not an error", () => {
    expect(parseCursor("9223372036854775808")).toBe(MAX_CURSOR);
    expect(parseCursor("99999999999999999999999999")).toBe(MAX_CURSOR);
  });

  test.each(["-1", "+1", "1.5", " 1", "1 ", "1e3", "0x10", "abc", "١٢", "１"])(
    "%p is INVALID_ARGUMENT naming after",
    (after) => {
      const error = failure(() => parseCursor(after));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.message).toMatch(/^after: /);
    },
  );

  test("the error is the kit's InvalidArgumentError with field after", () => {
    try {
      parseCursor("x");
      throw new Error("no error");
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).field).toBe("after");
    }
  });
});

describe("watchStart: snapshot, reset snapshot or resume", () => {
  const log = { floor: 10n, head: 20n };

  test("no cursor → snapshot without reset", () => {
    expect(watchStart(null, log)).toEqual({ snapshot: true, reset: false });
    expect(watchStart(null, { floor: 0n, head: 0n })).toEqual({ snapshot: true, reset: false });
  });

  test("below the floor (pruned) → reset snapshot", () => {
    expect(watchStart(9n, log)).toEqual({ snapshot: true, reset: true });
    expect(watchStart(0n, log)).toEqual({ snapshot: true, reset: true });
  });

  test("above the head (unknown, e.g. another tenant's or a clamped cursor) → reset snapshot", () => {
    expect(watchStart(21n, log)).toEqual({ snapshot: true, reset: true });
    expect(watchStart(MAX_CURSOR, log)).toEqual({ snapshot: true, reset: true });
    expect(watchStart(1n, { floor: 0n, head: 0n })).toEqual({ snapshot: true, reset: true });
  });

  test("from the floor to the head inclusive → resume after the cursor", () => {
    expect(watchStart(10n, log)).toEqual({ snapshot: false, cursor: 10n });
    expect(watchStart(15n, log)).toEqual({ snapshot: false, cursor: 15n });
    expect(watchStart(20n, log)).toEqual({ snapshot: false, cursor: 20n });
    expect(watchStart(0n, { floor: 0n, head: 0n })).toEqual({ snapshot: false, cursor: 0n });
  });
});
