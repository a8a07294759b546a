import { CREDENTIAL_CHANNEL, credentialTag, type ParsedToken, sha256, verifySecret } from "@unimatrix/service-kit/auth";
import { type Bus, InvalidatedCache, publishInvalidation } from "@unimatrix/service-kit/bus";
import type { Clock } from "@unimatrix/service-kit/clock";
import type { Logger } from "pino";
import type { MachineCredential, MachineStore } from "../store/machines";

/** Most age of a cached machine credential while the bus is healthy (bounds a lost invalidation). */
const MAX_AGE_MS = 60_000;
/**
 * Most age while the bus is down, when credential news can be missed: the bound every edge cache
 * of the fleet keeps (the gateway's `GATEWAY_AUTH_CACHE_MS` is at most 5 s, cube's token cache 5 s).
 */
const DOWN_MAX_AGE_MS = 5_000;
const MAX_ENTRIES = 20_000;

/** The machine a token authenticates as. */
export interface AuthenticatedMachine {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
}

/**
 * Machine tokens → machines, read through a per-replica cache: every call a machine makes (each
 * link open first of all) authenticates, and the credential row only changes when the machine is
 * revoked. A revocation drops the entry on every replica through credential news (`revoked`:
 * this replica at once, the others over the bus); while the bus is down an entry is trusted
 * 5 s at most and the cache is emptied when it comes back. The secret is checked against the
 * cached verifier on every call, and only active machines are cached. A link's open re-checks
 * revocation under the machine's row lock whatever the cache says.
 */
export class MachineAuth {
  readonly #cache: InvalidatedCache<MachineCredential>;

  constructor(
    private readonly machines: Pick<MachineStore, "credential">,
    private readonly deps: { readonly bus: Bus; readonly clock: Clock; readonly logger: Logger },
  ) {
    this.#cache = new InvalidatedCache<MachineCredential>({
      bus: deps.bus,
      channel: CREDENTIAL_CHANNEL,
      maxAgeMs: MAX_AGE_MS,
      downMaxAgeMs: DOWN_MAX_AGE_MS,
      maxEntries: MAX_ENTRIES,
      now: () => deps.clock.now().getTime(),
    });
  }

  /** Listens to credential news. Call once before use. */
  async open(): Promise<void> {
    await this.#cache.open();
  }

  async close(): Promise<void> {
    await this.#cache.close();
  }

  /** The active machine a machine token names, or null when unknown, wrong or revoked. */
  async authenticate(token: ParsedToken): Promise<AuthenticatedMachine | null> {
    if (token.kind !== "machine") return null;
    const lookup = sha256(token.lookup);
    const credential = await this.#cache.through(lookup.toString("base64"), async () => {
      const found = await this.machines.credential(lookup);
      if (!found || found.revoked) return null;
      return { value: found, tags: [credentialTag.machine(found.id)] };
    });
    if (!credential || !verifySecret(token.secret, credential.verifierDigest)) return null;
    return { id: credential.id, tenantId: credential.tenantId, name: credential.name };
  }

  /**
   * After the commit that revoked machine `id`: credential news on the fleet's channel, so every
   * replica's cache (this one before this returns) and the gateways' caches and open streams drop it.
   */
  async revoked(id: string): Promise<void> {
    const { bus, logger } = this.deps;
    await publishInvalidation(bus, CREDENTIAL_CHANNEL, [credentialTag.machine(id)], logger, [this.#cache]);
  }

  /** Hits, misses, entries (tests). */
  stats() {
    return this.#cache.stats();
  }
}
