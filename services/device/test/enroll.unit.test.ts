import { status } from "@grpc/grpc-js";
import {
  BAD_ENROLL_TOKEN,
  enrollStep,
  expiresAt,
  MAX_TTL_SECONDS,
  tokenLive,
  tokenUnused,
  ttlSeconds,
} from "../src/rules/enroll";
import { at, NOW, refusal, tokenRow } from "./rows";

describe("enroll token lifetime", () => {
  it("takes whole seconds from 1 to 604800 (seven days)", () => {
    expect(MAX_TTL_SECONDS).toBe(7 * 24 * 3600);
    expect(ttlSeconds(1)).toBe(1);
    expect(ttlSeconds(604_800)).toBe(604_800);
    for (const bad of [0, -1, 604_801, 1.5, Number.NaN, 2 ** 32]) {
      const error = refusal(() => ttlSeconds(bad));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.field).toBe("ttl_seconds");
    }
  });

  it("expires ttl seconds after issue", () => {
    expect(expiresAt(NOW, 600).getTime()).toBe(NOW.getTime() + 600_000);
  });

  it("is live strictly before expires_at and never once revoked", () => {
    const token = tokenRow({ expires_at: at(1000) });
    expect(tokenLive(token, at(999))).toBe(true);
    expect(tokenLive(token, at(1000))).toBe(false);
    expect(tokenLive(token, at(1001))).toBe(false);
    expect(tokenLive(tokenRow({ revoked_at: at(-1) }), NOW)).toBe(false);
  });

  it("is listed as unused only while live and not consumed", () => {
    expect(tokenUnused(tokenRow(), NOW)).toBe(true);
    expect(tokenUnused(tokenRow({ consumed_at: at(-1), consumed_by_public_key: "k" }), NOW)).toBe(false);
    expect(tokenUnused(tokenRow({ expires_at: NOW }), NOW)).toBe(false);
  });
});

describe("presenting an enroll token", () => {
  it("consumes an unused live token", () => {
    expect(enrollStep(tokenRow(), "key-a", NOW)).toBe("first");
  });

  it("replays for the same public key and refuses another key with FAILED_PRECONDITION", () => {
    const consumed = tokenRow({ consumed_at: at(-1000), consumed_by_public_key: "key-a" });
    expect(enrollStep(consumed, "key-a", NOW)).toBe("replay");
    expect(refusal(() => enrollStep(consumed, "key-b", NOW)).code).toBe(status.FAILED_PRECONDITION);
  });

  it("answers expired and revoked tokens alike with UNAUTHENTICATED, replay or not", () => {
    const cases = [
      tokenRow({ expires_at: NOW }),
      tokenRow({ revoked_at: at(-1) }),
      tokenRow({ expires_at: at(-1), consumed_at: at(-2000), consumed_by_public_key: "key-a" }),
    ];
    for (const token of cases) {
      const error = refusal(() => enrollStep(token, "key-a", NOW));
      expect(error.code).toBe(status.UNAUTHENTICATED);
      expect(error.message).toBe(BAD_ENROLL_TOKEN);
    }
  });
});
