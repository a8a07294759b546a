import fc from "fast-check";
import { resumeCursor } from "../src/sse";

describe("fuzz: SSE resume position (Last-Event-ID and ?after=)", () => {
  test("`?after=` wins, else the Last-Event-ID header as sent, else none; never throws", () => {
    fc.assert(
      fc.property(
        fc.option(fc.string(), { nil: undefined }),
        fc.option(fc.string(), { nil: undefined }),
        (after, last) => {
          const url = new URL("http://gateway/v1/cubes/x/events");
          if (after !== undefined) url.searchParams.set("after", after);
          const headers = last !== undefined ? { "last-event-id": last } : {};
          const got = resumeCursor({ headers }, new URL(url.toString()));
          expect(got).toBe(after !== undefined ? after : last);
        },
      ),
      { numRuns: 400 },
    );
  });
});
