import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import fc from "fast-check";
import { auditFilters, deviceFilters, devicePageTokens } from "../src/rules/paging";

const RUNS = { numRuns: 400 };
const pages = devicePageTokens("fuzz-key-0123456789abcdef");

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
  const binding = fc.record({
    caller: fc.string(),
    filter: fc.constantFrom(null, "active", "revoked").map(deviceFilters),
  });
  const key = fc.record({
    at: fc.date({ min: new Date(0), max: new Date(8.64e15), noInvalidDate: true }),
    id: fc.uuid().map((u) => u.toLowerCase()),
  });

  test("round-trip with the same caller and filters; other callers, filters, lists or made-up text are INVALID_ARGUMENT", () => {
    fc.assert(
      fc.property(key, binding, binding, fc.string(), (k, mine, theirs, junk) => {
        const token = pages.devices.seal(k, mine);
        expect(pages.devices.open(token, mine)).toEqual(k);
        expect(refusedOr(() => pages.enrollTokens.open(token, mine))).toBe("refused");
        if (JSON.stringify(mine) !== JSON.stringify(theirs))
          expect(refusedOr(() => pages.devices.open(token, theirs))).toBe("refused");
        const made = refusedOr(() => pages.devices.open(junk, mine));
        if (made !== "refused") expect(junk).toBe("");
      }),
      RUNS,
    );
  });

  test("audit seq tokens round-trip any uint64 and are bound to the filters", () => {
    const filter = auditFilters({ deviceId: null, types: [], start: null, end: null });
    const narrowed = auditFilters({ deviceId: null, types: ["device_enrolled"], start: null, end: null });
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }), fc.string(), (seq, caller) => {
        const token = pages.audit.seal(seq, { caller, filter });
        expect(pages.audit.open(token, { caller, filter })).toBe(seq);
        expect(refusedOr(() => pages.audit.open(token, { caller, filter: narrowed }))).toBe("refused");
      }),
      RUNS,
    );
  });
});
