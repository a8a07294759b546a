import { status } from "@grpc/grpc-js";
import {
  bearerToken,
  constantTimeEquals,
  type Principal,
  parseToken,
  principalFromMessage,
  sha256,
} from "@unimatrix/service-kit/auth";
import type { Clock } from "@unimatrix/service-kit/clock";
import { DomainError, UnauthenticatedError, UnavailableError } from "@unimatrix/service-kit/errors";
import { isServiceError } from "@unimatrix/service-kit/grpc";
import type { Upstreams } from "./upstreams";

/** Options of the edge authenticator. */
export interface EdgeAuthOptions {
  readonly upstreams: Upstreams;
  readonly operatorToken: string | undefined;
  /** How long a resolved token is trusted without asking its service again (at most 5 s). */
  readonly cacheMs: number;
  readonly clock: Clock;
  /** Most tokens kept in the cache; the oldest go first. */
  readonly maxEntries?: number;
}

const OPERATOR: Principal = { kind: "operator", subjectId: "operator", tenantId: null };

/** An authenticated caller and the key its rate limit and stream counts are kept under. */
export interface EdgeCaller {
  readonly principal: Principal;
  /** SHA-256 of the token, hex: identifies the credential without keeping it. */
  readonly credentialKey: string;
}

/**
 * Turns `Authorization: Bearer umx_…` into a principal through the service that owns the token
 * kind, caching the answer for at most `cacheMs` so a revoked token stops working within it.
 */
export class EdgeAuthenticator {
  /** Resolved tokens, and refused ones (principal null), each until the cache period ends. */
  readonly #cache = new Map<string, { principal: Principal | null; until: number }>();
  readonly #pending = new Map<string, Promise<Principal>>();
  readonly #options: EdgeAuthOptions;

  constructor(options: EdgeAuthOptions) {
    this.#options = { ...options, cacheMs: Math.min(options.cacheMs, 5_000) };
  }

  /**
   * The caller of a request; UNAUTHENTICATED for a missing, malformed, unknown or revoked token.
   * A token not in the cache costs its owner service a lookup: `onMiss` (the per-address limit)
   * is charged first, concurrent lookups of one token share one call, and a refusal is remembered
   * for the cache period too, so a flood of bad tokens cannot turn into a flood of lookups.
   */
  async authenticate(authorization: string | null | undefined, onMiss?: () => Promise<void>): Promise<EdgeCaller> {
    const token = bearerToken(authorization ?? undefined);
    if (!token) throw new UnauthenticatedError("missing bearer token");
    const credentialKey = sha256(token).toString("hex");
    const now = this.#options.clock.now().getTime();
    const cached = this.#cache.get(credentialKey);
    if (cached && cached.until > now) {
      if (cached.principal === null) throw new UnauthenticatedError("invalid credential");
      return { principal: cached.principal, credentialKey };
    }
    let pending = this.#pending.get(credentialKey);
    if (!pending) {
      const charged = onMiss?.();
      pending = (charged ? charged.then(() => this.#resolve(token)) : this.#resolve(token)).then(
        (principal) => {
          this.#remember(credentialKey, principal, this.#options.clock.now().getTime());
          return principal;
        },
        (error: unknown) => {
          if (error instanceof UnauthenticatedError) {
            this.#remember(credentialKey, null, this.#options.clock.now().getTime());
          }
          throw error;
        },
      );
      pending.catch(() => {}).finally(() => this.#pending.delete(credentialKey));
      this.#pending.set(credentialKey, pending);
    }
    return { principal: await pending, credentialKey };
  }

  /** The credential key of an `Authorization` header without resolving it (undefined without a bearer token). */
  credentialKeyOf(authorization: string | null | undefined): string | undefined {
    const token = bearerToken(authorization ?? undefined);
    return token ? sha256(token).toString("hex") : undefined;
  }

  /** The caller as its owner service answers now (the cached answer is dropped first): after access news. */
  refresh(authorization: string | null | undefined): Promise<EdgeCaller> {
    const key = this.credentialKeyOf(authorization);
    if (key !== undefined && !this.#pending.has(key)) this.#cache.delete(key);
    return this.authenticate(authorization);
  }

  /** Forgets every cached answer (tests, and after an operator-initiated revocation). */
  clear(): void {
    this.#cache.clear();
  }

  async #resolve(token: string): Promise<Principal> {
    if (token.startsWith("umx_operator_")) {
      if (this.#options.operatorToken && constantTimeEquals(token, this.#options.operatorToken)) return OPERATOR;
      throw new UnauthenticatedError("invalid credential");
    }
    const parsed = parseToken(token);
    if (!parsed) throw new UnauthenticatedError("malformed bearer token");
    const { upstreams } = this.#options;
    const ask = async () => {
      switch (parsed.kind) {
        case "client":
        case "user":
        case "drone":
          return (await upstreams.identity.authenticate({ token }, { deadline: 5_000 })).principal;
        case "machine":
          return (await upstreams.machine.authenticate({ token }, { deadline: 5_000 })).principal;
        case "device":
          return (await upstreams.device.authenticate({ token }, { deadline: 5_000 })).principal;
        default:
          return undefined;
      }
    };
    try {
      const principal = principalFromMessage(await ask());
      if (!principal) throw new UnauthenticatedError("invalid credential");
      return principal;
    } catch (error) {
      if (error instanceof DomainError) throw error;
      if (isServiceError(error) && error.code === status.UNAUTHENTICATED) {
        throw new UnauthenticatedError("invalid credential");
      }
      if (isServiceError(error) && error.code === status.UNIMPLEMENTED) {
        throw new UnauthenticatedError("this kind of credential is not accepted yet");
      }
      throw new UnavailableError("the service that owns this credential is unavailable");
    }
  }

  #remember(key: string, principal: Principal | null, now: number): void {
    const max = this.#options.maxEntries ?? 10_000;
    if (this.#cache.size >= max) {
      const oldest = this.#cache.keys().next().value;
      if (oldest !== undefined) this.#cache.delete(oldest);
    }
    this.#cache.delete(key);
    this.#cache.set(key, { principal, until: now + this.#options.cacheMs });
  }
}
