import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** The kinds of bearer token Unimatrix issues; the kind names the service that owns the token. */
export type TokenKind = "operator" | "client" | "user" | "drone" | "machine" | "device" | "enroll";

const TOKEN_KINDS: readonly TokenKind[] = ["operator", "client", "user", "drone", "machine", "device", "enroll"];
const PART = /^[A-Za-z0-9-]+$/;

/** A freshly minted token: the plaintext (shown once) and the digests that are stored. */
export interface IssuedToken {
  readonly token: string;
  readonly lookup: string;
  /** SHA-256 of the lookup part: the indexed column. */
  readonly lookupDigest: Buffer;
  /** SHA-256 of the secret part: compared in constant time. */
  readonly verifierDigest: Buffer;
}

/** A parsed `umx_<kind>_<lookup>_<secret>` token. */
export interface ParsedToken {
  readonly kind: TokenKind;
  readonly lookup: string;
  readonly secret: string;
}

/** SHA-256 of a string, as 32 bytes. */
export function sha256(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

/** Mints a token of a kind: 12 random bytes of lookup, 32 of secret, base64url. */
export function issueToken(kind: TokenKind): IssuedToken {
  const lookup = randomBytes(12).toString("base64url").replaceAll("_", "-");
  const secret = randomBytes(32).toString("base64url").replaceAll("_", "-");
  return {
    token: `umx_${kind}_${lookup}_${secret}`,
    lookup,
    lookupDigest: sha256(lookup),
    verifierDigest: sha256(secret),
  };
}

/** Parses a bearer token; null when it is not of the Unimatrix shape. */
export function parseToken(token: string): ParsedToken | null {
  const parts = token.split("_");
  if (parts.length !== 4 || parts[0] !== "umx") return null;
  const [, kind, lookup, secret] = parts as [string, string, string, string];
  if (!TOKEN_KINDS.includes(kind as TokenKind)) return null;
  if (!PART.test(lookup) || !PART.test(secret) || lookup.length > 64 || secret.length > 128) return null;
  return { kind: kind as TokenKind, lookup, secret };
}

/** True when the secret matches the stored verifier digest; constant time in the digest length. */
export function verifySecret(secret: string, verifierDigest: Uint8Array): boolean {
  const actual = sha256(secret);
  return verifierDigest.length === actual.length && timingSafeEqual(actual, verifierDigest);
}

/** Compares two strings in constant time (for the operator token from config). */
export function constantTimeEquals(a: string, b: string): boolean {
  const da = sha256(a);
  const db = sha256(b);
  return timingSafeEqual(da, db);
}
