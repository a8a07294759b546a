import { status } from "@grpc/grpc-js";
import { credentialTags, expiresAtOf, type Principal } from "@unimatrix/service-kit/auth";
import { DomainError } from "@unimatrix/service-kit/errors";
import type { EdgeAuthenticator } from "./auth";

/** An open stream of an edge caller: closed (with its own final event) when its credential stops authenticating. */
interface Door {
  readonly authorization: string;
  readonly tags: readonly string[];
  readonly close: () => void;
  /** When its session expires (checked then); re-armed when a check finds the session extended. */
  expiry?: { readonly at: number; readonly timer: NodeJS.Timeout };
}

/** Counters of the doors (tests and metrics). */
export interface DoorStats {
  /** Streams open now. */
  readonly open: number;
  /** Streams closed because their credential stopped authenticating. */
  readonly closed: number;
  /** Re-checks run (one per credential per round). */
  readonly checks: number;
}

/** True for an answer that means "this credential no longer authenticates" (not "could not ask"). */
function refused(error: unknown): boolean {
  return error instanceof DomainError && error.code === status.UNAUTHENTICATED;
}

/**
 * Every open edge stream (SSE, Connect server streams, MCP push) with the credential it was opened
 * with. Credential news from the bus (`news`) drops the named answers from the authenticator's
 * cache and re-checks the named streams' credentials at once; every `sweepMs` all of them are
 * checked with cached answers, which bounds a missed piece of news (the bus down) by the cache
 * period plus `sweepMs`; a session's stream is checked at its expiry. A stream whose credential is
 * refused is closed through its own `close`.
 */
export class CredentialDoors {
  readonly #auth: EdgeAuthenticator;
  readonly #doors = new Set<Door>();
  readonly #timer: NodeJS.Timeout;
  #closed = 0;
  #checks = 0;

  constructor(auth: EdgeAuthenticator, sweepMs: number) {
    this.#auth = auth;
    this.#timer = setInterval(() => void this.#check([...this.#doors], false), sweepMs);
    this.#timer.unref();
  }

  /**
   * Registers a stream opened with `authorization` (as `principal`, when resolved: its tags let
   * news name it; unresolved streams are checked on every news and sweep). Returns the unregister.
   */
  open(authorization: string | undefined, principal: Principal | undefined, close: () => void): () => void {
    if (!authorization) return () => {};
    const door: Door = { authorization, tags: principal ? credentialTags(principal) : [], close };
    this.#doors.add(door);
    if (principal) this.#arm(door, principal);
    return () => {
      clearTimeout(door.expiry?.timer);
      this.#doors.delete(door);
    };
  }

  /**
   * Credential news: `tags` name the credentials that changed (undefined: any may have, after a bus
   * reconnect). Cached answers go first, then the streams named are checked afresh.
   */
  news(tags: readonly string[] | undefined): Promise<void> {
    if (tags === undefined) this.#auth.clear();
    else this.#auth.invalidate(tags);
    const named = new Set(tags ?? []);
    const doors = [...this.#doors].filter(
      (door) => tags === undefined || door.tags.length === 0 || door.tags.some((tag) => named.has(tag)),
    );
    return this.#check(doors, true);
  }

  stats(): DoorStats {
    return { open: this.#doors.size, closed: this.#closed, checks: this.#checks };
  }

  /** Stops the sweep (gateway stop). */
  stop(): void {
    clearInterval(this.#timer);
  }

  /** A session ends by itself at its expiry: its door is checked then, with no news to wait for. */
  #arm(door: Door, principal: Principal): void {
    const at = expiresAtOf(principal);
    if (at === undefined || door.expiry?.at === at) return;
    clearTimeout(door.expiry?.timer);
    const delay = Math.min(2 ** 31 - 1, Math.max(0, at - Date.now()) + 5);
    const timer = setTimeout(() => void this.#check([door], true), delay);
    timer.unref();
    door.expiry = { at, timer };
  }

  /** One check per credential; every door of a refused one is closed. */
  async #check(doors: readonly Door[], fresh: boolean): Promise<void> {
    const byCredential = new Map<string, Door[]>();
    for (const door of doors) {
      const group = byCredential.get(door.authorization);
      if (group) group.push(door);
      else byCredential.set(door.authorization, [door]);
    }
    await Promise.all(
      [...byCredential].map(async ([authorization, group]) => {
        this.#checks += 1;
        try {
          const { principal } = await (fresh
            ? this.#auth.refresh(authorization)
            : this.#auth.authenticate(authorization));
          for (const door of group) if (this.#doors.has(door)) this.#arm(door, principal);
        } catch (error) {
          if (!refused(error)) return; // could not ask: keep them, the next check decides
          for (const door of group) {
            if (!this.#doors.delete(door)) continue;
            this.#closed += 1;
            door.close();
          }
        }
      }),
    );
  }
}
