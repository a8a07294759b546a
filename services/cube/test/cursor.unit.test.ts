import { randomUUID } from "node:crypto";
import { status } from "@grpc/grpc-js";
import { DomainError, InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { cursorPosition, decodeCursor, encodeCursor } from "../src/rules/cursor";

const cube = randomUUID();

/** The error `fn` throws (fails the test when it throws nothing). */
function thrown(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error("expected a DomainError, nothing was thrown");
}

describe("activity cursors", () => {
  test("round-trip: a cursor names its cube and position, is opaque and URL-safe", () => {
    for (const position of [0n, 1n, 255n, 1_000_000n, 2n ** 63n, 2n ** 64n - 1n]) {
      const cursor = encodeCursor(cube, position);
      expect(cursor).toMatch(/^a[A-Za-z0-9_-]{32}$/);
      expect(cursor).not.toContain(cube.replaceAll("-", ""));
      expect(decodeCursor("cursor", cube, cursor)).toBe(position);
    }
  });

  test("positions keep their order in distinct cursors", () => {
    const cursors = [1n, 2n, 3n].map((p) => encodeCursor(cube, p));
    expect(new Set(cursors).size).toBe(3);
  });

  test("the empty cursor is the start of the log", () => {
    expect(decodeCursor("cursor", cube, "")).toBe(0n);
    expect(cursorPosition("after", cube, { head: 10n, floor: 0n }, "")).toBe(0n);
  });

  test("a cursor of another cube is INVALID_ARGUMENT naming the field", () => {
    const foreign = encodeCursor(randomUUID(), 5n);
    const error = thrown(() => decodeCursor("after", cube, foreign));
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).field).toBe("after");
    expect(error.message).toBe("after: belongs to another cube");
  });

  test("malformed cursors are INVALID_ARGUMENT naming the field", () => {
    const good = encodeCursor(cube, 7n);
    const bad = [
      "x",
      "a",
      good.slice(1), // no prefix
      `b${good.slice(1)}`, // other prefix
      good.slice(0, -2), // truncated
      `${good}AA`, // too long
      `${good.slice(0, -1)}=`, // padding is not canonical
      "a!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
    ];
    for (const cursor of bad) {
      const error = thrown(() => decodeCursor("cursor", cube, cursor));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.message).toBe("cursor: is not a valid activity cursor");
    }
  });

  test("a cursor ahead of the cube's head is INVALID_ARGUMENT; at the head it is fine", () => {
    const window = { head: 10n, floor: 0n };
    expect(cursorPosition("cursor", cube, window, encodeCursor(cube, 10n))).toBe(10n);
    const error = thrown(() => cursorPosition("cursor", cube, window, encodeCursor(cube, 11n)));
    expect(error.code).toBe(status.INVALID_ARGUMENT);
    expect(error.message).toBe("cursor: is ahead of the cube's activity");
  });

  test("an expired cursor (behind the pruned floor) is FAILED_PRECONDITION; the empty cursor starts at the floor", () => {
    const window = { head: 100n, floor: 40n };
    const error = thrown(() => cursorPosition("after", cube, window, encodeCursor(cube, 39n)));
    expect(error.code).toBe(status.FAILED_PRECONDITION);
    expect(error.message).toContain("after has expired");
    expect(cursorPosition("after", cube, window, encodeCursor(cube, 40n))).toBe(40n);
    expect(cursorPosition("after", cube, window, "")).toBe(40n);
  });

  test("nothing is pruned yet (floor 0): no cursor expires", () => {
    expect(cursorPosition("after", cube, { head: 3n, floor: 0n }, encodeCursor(cube, 0n))).toBe(0n);
  });
});
