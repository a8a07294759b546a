import { status } from "@grpc/grpc-js";
import {
  bearerToken,
  constantTimeEquals,
  credentialTags,
  expiresAtOf,
  looksLikeJwt,
  type Principal,
  parseToken,
  principalFromMessage,
  sha256,
} from "@unimatrix/service-kit/auth";
import type { Clock } from "@unimatrix/service-kit/clock";
import { DomainError, UnauthenticatedError, UnavailableError } from "@unimatrix/service-kit/errors";
import { isServiceError } from "@unimatrix/service-kit/grpc";
import type { ProtectedResource } from "./protected-resource";
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
  /**
   * Charged before a token not in the cache is looked up, with the token's `<kind>_<lookup>` (the
   * per-lookup limit: guesses at one credential are bounded, other credentials are not touched).
   */
  readonly chargeLookup?: (lookup: string) => Promise<void>;
  /** The identity provider whose access tokens are accepted (through cube), for the 401 challenge; none: Unimatrix tokens only. */
  readonly resource?: ProtectedResource | undefined;
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
 * kind, caching the answer for at most `cacheMs`. Credential news on the bus (`invalidate`) drops
 * the answers it names at once, on every replica; `cacheMs` bounds a missed one (the bus down).
 */
export class EdgeAuthenticator {
  /** Resolved tokens, and refused ones (principal null), each until the cache period ends. */
  readonly #cache = new Map<string, { principal: Principal | null; until: number; tags: readonly string[] }>();
  /** Cache keys by the credential-news tags of their principal. */
  readonly #byTag = new Map<string, Set<string>>();
  readonly #pending = new Map<string, Promise<Principal>>();
  readonly #options: EdgeAuthOptions;
  /** Bumped by every invalidation: a lookup that raced one is answered but not kept. */
  #epoch = 0;

  constructor(options: EdgeAuthOptions) {
    this.#options = { ...options, cacheMs: Math.min(options.cacheMs, 5_000) };
  }

  /** The protected resource whose challenge a 401 carries (undefined without an identity provider). */
  get resource(): ProtectedResource | undefined {
    return this.#options.resource;
  }

  /**
   * The caller of a request; UNAUTHENTICATED for a missing, malformed, unknown or revoked token.
   * A token not in the cache costs its owner service a lookup: the per-lookup limit
   * (`chargeLookup`, for a request's own token: when `onMiss` is given) is charged first,
   * concurrent lookups of one token share one call, and a refusal is remembered for the cache
   * period too, so a flood of one bad token cannot turn into a flood of lookups. `onMiss` (the per-address limit) is charged only when the lookup refuses the
   * token: failed authentications from an address never block a valid credential presented there.
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
    if (cached) this.#forget(credentialKey);
    let pending = this.#pending.get(credentialKey);
    if (!pending) {
      const parsed = parseToken(token);
      // Charged for a request's own token (with `onMiss`), not for re-checks of a stream already admitted.
      const charged = parsed && onMiss ? this.#options.chargeLookup?.(`${parsed.kind}_${parsed.lookup}`) : undefined;
      const epoch = this.#epoch;
      pending = (charged ? charged.then(() => this.#resolve(token)) : this.#resolve(token)).then(
        (principal) => {
          if (epoch === this.#epoch) this.#remember(credentialKey, principal, this.#options.clock.now().getTime());
          return principal;
        },
        async (error: unknown) => {
          if (error instanceof UnauthenticatedError) {
            this.#remember(credentialKey, null, this.#options.clock.now().getTime());
            await onMiss?.();
          }
          throw error;
        },
      );
      const mine = pending;
      mine
        .catch(() => {})
        .finally(() => {
          if (this.#pending.get(credentialKey) === mine) this.#pending.delete(credentialKey);
        });
      this.#pending.set(credentialKey, mine);
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
    if (key !== undefined && !this.#pending.has(key)) this.#forget(key);
    return this.authenticate(authorization);
  }

  /** Forgets every cached answer (a bus reconnect: credential news may have been missed). */
  clear(): void {
    this.#epoch += 1;
    this.#cache.clear();
    this.#byTag.clear();
    this.#pending.clear();
  }

  /** Forgets the answers for credentials credential news names (`credentialTags`); lookups in flight are not kept. */
  invalidate(tags: readonly string[]): void {
    this.#epoch += 1;
    for (const tag of tags) {
      for (const key of [...(this.#byTag.get(tag) ?? [])]) {
        this.#forget(key);
        this.#pending.delete(key);
      }
    }
  }

  async #resolve(token: string): Promise<Principal> {
    if (token.startsWith("umx_operator_")) {
      if (this.#options.operatorToken && constantTimeEquals(token, this.#options.operatorToken)) return OPERATOR;
      throw new UnauthenticatedError("invalid credential");
    }
    const parsed = parseToken(token);
    // The identity provider's access tokens are verified by cube, which owns the identities they map to.
    const jwt = !parsed && this.#options.resource !== undefined && looksLikeJwt(token);
    if (!parsed && !jwt) throw new UnauthenticatedError("malformed bearer token");
    const { upstreams } = this.#options;
    const ask = async () => {
      if (!parsed) return (await upstreams.identity.authenticate({ token }, { deadline: 5_000 })).principal;
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
        // An access token's refusal names what was wrong (expired, audience, scope): nothing secret.
        throw new UnauthenticatedError(jwt ? error.details : "invalid credential");
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
      if (oldest !== undefined) this.#forget(oldest);
    }
    this.#forget(key);
    const tags = principal ? credentialTags(principal) : [];
    // A session's answer is never trusted past its expiry.
    const until = Math.min(
      now + this.#options.cacheMs,
      (principal && expiresAtOf(principal)) ?? Number.POSITIVE_INFINITY,
    );
    this.#cache.set(key, { principal, until, tags });
    for (const tag of tags) {
      const keys = this.#byTag.get(tag) ?? new Set<string>();
      keys.add(key);
      this.#byTag.set(tag, keys);
    }
  }

  #forget(key: string): void {
    const entry = this.#cache.get(key);
    if (!entry) return;
    this.#cache.delete(key);
    for (const tag of entry.tags) {
      const keys = this.#byTag.get(tag);
      keys?.delete(key);
      if (keys?.size === 0) this.#byTag.delete(tag);
    }
  }
}
