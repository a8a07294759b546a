import {
  bearerToken,
  issueToken,
  type Principal,
  parseToken,
  signPrincipal,
  verifyPrincipal,
} from "@unimatrix/service-kit/auth";
import fc from "fast-check";

/** Bounded runs: part of `npm test`, a few hundred cases per property. */
const RUNS = { numRuns: 400 };

const principal: fc.Arbitrary<Principal> = fc.oneof(
  fc.constant<Principal>({ kind: "operator", subjectId: "operator", tenantId: null }),
  fc.record({
    kind: fc.constantFrom("user" as const, "client" as const, "machine" as const, "device" as const),
    subjectId: fc.uuid(),
    tenantId: fc.uuid(),
  }),
  fc.record({
    kind: fc.constant("drone-session" as const),
    subjectId: fc.uuid(),
    tenantId: fc.uuid(),
    clientId: fc.uuid(),
    cubeId: fc.uuid(),
    droneId: fc.uuid(),
  }),
);

describe("fuzz: principal metadata (signed principals)", () => {
  const key = "fuzz-key-0123456789abcdef0123456789abcdef";

  test("any string verifies to null or a principal, never throws", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.base64String(), fc.stringMatching(/^[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$/)),
        (value) => {
          const result = verifyPrincipal(value, key);
          expect(result === null || typeof result.kind === "string").toBe(true);
        },
      ),
      RUNS,
    );
  });

  test("sign → verify round-trips; a changed body character, another key or expiry gives null", () => {
    fc.assert(
      fc.property(principal, fc.nat({ max: 10_000 }), (p, flipAt) => {
        const now = 1_800_000_000_000;
        const signed = signPrincipal(p, key, now, 60_000);
        expect(verifyPrincipal(signed, key, now)).toEqual(p);
        expect(verifyPrincipal(signed, `${key}x`, now)).toBeNull();
        expect(verifyPrincipal(signed, key, now + 60_000)).toBeNull();
        // A changed body character always fails (the MAC covers the body text). The MAC's own
        // last base64url character carries spare bits, so only the body is tampered with.
        const i = flipAt % signed.indexOf(".");
        const c = signed[i] === "A" ? "B" : "A";
        const tampered = `${signed.slice(0, i)}${c}${signed.slice(i + 1)}`;
        if (tampered !== signed) expect(verifyPrincipal(tampered, key, now)).toBeNull();
      }),
      RUNS,
    );
  });
});

describe("fuzz: bearer tokens", () => {
  test("parseToken never throws; what it accepts re-joins to the input", () => {
    const shaped = fc
      .tuple(fc.constantFrom("umx", "UMX", "x"), fc.string(), fc.string(), fc.string())
      .map((parts) => parts.join("_"));
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: "binary" }), shaped), (token) => {
        const parsed = parseToken(token);
        if (parsed) expect(`umx_${parsed.kind}_${parsed.lookup}_${parsed.secret}`).toBe(token);
      }),
      RUNS,
    );
  });

  test("issued tokens parse back to their kind; the Authorization header parser finds them", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("user" as const, "client" as const, "drone" as const, "machine" as const, "device" as const),
        fc.constantFrom("Bearer ", "bearer  ", "BEARER\t"),
        (kind, scheme) => {
          const { token } = issueToken(kind);
          expect(parseToken(token)?.kind).toBe(kind);
          expect(bearerToken(`${scheme}${token}`)).toBe(token);
        },
      ),
      { numRuns: 100 },
    );
  });

  test("bearerToken never throws and never returns whitespace", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string().map((s) => `Bearer ${s}`),
        ),
        (header) => {
          const token = bearerToken(header);
          if (token !== null) expect(/\s/.test(token)).toBe(false);
        },
      ),
      RUNS,
    );
  });
});
