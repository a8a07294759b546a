import { createHmac, timingSafeEqual } from "node:crypto";
import type { Metadata } from "@grpc/grpc-js";

/** Who is calling. Resolved once at the edge (or by the owning service) and trusted after. */
export type Principal =
  | {
      readonly kind: "operator";
      readonly subjectId: "operator";
      readonly tenantId: null;
      readonly credentialId?: undefined;
    }
  | {
      readonly kind: "user" | "client" | "machine" | "device";
      readonly subjectId: string;
      readonly tenantId: string;
      /** The credential (token record) the principal was resolved from, when known: a rotation makes it stale. */
      readonly credentialId?: string;
      /** When the provider's access token it was resolved from expires (epoch ms); none for Unimatrix tokens. */
      readonly expiresAt?: number;
    }
  | {
      readonly kind: "drone-session";
      /** The drone session id. */
      readonly subjectId: string;
      readonly tenantId: string;
      readonly clientId: string;
      readonly cubeId: string;
      readonly droneId: string;
      /** The credential the principal was resolved from, when known (a drone session's is the session). */
      readonly credentialId?: string;
      /** When the session expires (epoch ms), when known: nothing trusts the principal past it. */
      readonly expiresAt?: number;
    };

/** Metadata key carrying a principal signed by the gateway (or another trusted caller). */
export const PRINCIPAL_HEADER = "x-umx-principal";
/** How long a signed principal stays valid: long enough for one call, short enough to not be worth stealing. */
const PRINCIPAL_TTL_MS = 60_000;

interface SignedBody {
  readonly p: Principal;
  /** Expiry, epoch milliseconds. */
  readonly exp: number;
}

function mac(key: string, body: string): Buffer {
  return createHmac("sha256", key).update(body).digest();
}

/** Signs a principal for `ttlMs`: `<base64url body>.<base64url HMAC-SHA256>`. */
export function signPrincipal(principal: Principal, key: string, nowMs = Date.now(), ttlMs = PRINCIPAL_TTL_MS): string {
  const body = Buffer.from(JSON.stringify({ p: principal, exp: nowMs + ttlMs } satisfies SignedBody)).toString(
    "base64url",
  );
  return `${body}.${mac(key, body).toString("base64url")}`;
}

/** The principal in a signed value, or null when the signature is wrong, the value malformed or expired. */
export function verifyPrincipal(value: string, key: string, nowMs = Date.now()): Principal | null {
  const dot = value.indexOf(".");
  if (dot <= 0) return null;
  const body = value.slice(0, dot);
  const given = Buffer.from(value.slice(dot + 1), "base64url");
  const expected = mac(key, body);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  try {
    const parsed = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as SignedBody;
    if (typeof parsed.exp !== "number" || parsed.exp <= nowMs) return null;
    return parsed.p;
  } catch {
    return null;
  }
}

/** Adds a signed principal to outgoing call metadata. */
export function attachPrincipal(metadata: Metadata, principal: Principal, key: string): Metadata {
  metadata.set(PRINCIPAL_HEADER, signPrincipal(principal, key));
  return metadata;
}

/** The bearer token in `authorization` metadata, or null. */
export function bearerToken(authorization: string | undefined): string | null {
  if (!authorization) return null;
  const match = /^Bearer\s+(\S+)$/i.exec(authorization.trim());
  return match?.[1] ?? null;
}

/** When a principal's credential expires by itself (epoch ms): a drone session's or an access token's expiry when known, else undefined. */
export function expiresAtOf(principal: Principal): number | undefined {
  return principal.kind === "operator" ? undefined : principal.expiresAt;
}
