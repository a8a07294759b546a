import type { Bus } from "../bus/bus";
import type { Principal } from "./principal";

/**
 * The fleet's one bus channel for credential news: a service that owns credentials names, after
 * its commit, the ones it rotated, revoked, evicted or whose grants changed (payload: tags separated
 * by spaces). Auth caches drop what the tags name; open streams of those credentials re-check.
 */
export const CREDENTIAL_CHANNEL = "auth";

/** The tags credential news names a credential's owners by. */
export const credentialTag = {
  client: (id: string) => `client:${id}`,
  drone: (id: string) => `drone:${id}`,
  session: (id: string) => `session:${id}`,
  user: (id: string) => `user:${id}`,
  machine: (id: string) => `machine:${id}`,
  device: (id: string) => `device:${id}`,
};

/** The tags of everything a principal's credential depends on (its client, drone, session, user, machine or device). */
export function credentialTags(principal: Principal): string[] {
  switch (principal.kind) {
    case "client":
      return [credentialTag.client(principal.subjectId)];
    case "drone-session":
      return [
        credentialTag.client(principal.clientId),
        credentialTag.drone(principal.droneId),
        credentialTag.session(principal.subjectId),
      ];
    case "user":
      return [credentialTag.user(principal.subjectId)];
    case "machine":
      return [credentialTag.machine(principal.subjectId)];
    case "device":
      return [credentialTag.device(principal.subjectId)];
    default:
      return [];
  }
}

/** The tags of a credential-news message (empty for an empty message). */
function tagsOfNews(message: string): string[] {
  return message.split(" ").filter((tag) => tag.length > 0);
}

/**
 * Listens to credential news: `onNews(tags)` for each message, `onNews(undefined)` after a bus
 * reconnect (news may have been missed: re-check everything). Resolves to the unsubscribe.
 */
export async function listenCredentialNews(
  bus: Bus,
  onNews: (tags: readonly string[] | undefined) => void,
): Promise<() => Promise<void>> {
  const subscription = await bus.subscribe(CREDENTIAL_CHANNEL, (message) => onNews(tagsOfNews(message)));
  const offReconnect = bus.onReconnect(() => onNews(undefined));
  return async () => {
    offReconnect();
    await subscription.unsubscribe();
  };
}

/**
 * A replica's board of credential news for code that holds open streams: `watch(principal, fn)`
 * calls `fn` when news names the principal's credential (or after a bus reconnect, when any may
 * have changed). One bus subscription per board.
 */
export class CredentialNewsBoard {
  readonly #watchers = new Set<{ readonly tags: ReadonlySet<string>; readonly fn: () => void }>();
  #stop: (() => Promise<void>) | undefined;

  /** Subscribes to the news on `bus`. */
  static async open(bus: Bus): Promise<CredentialNewsBoard> {
    const board = new CredentialNewsBoard();
    board.#stop = await listenCredentialNews(bus, (tags) => board.#tell(tags));
    return board;
  }

  /** Calls `fn` on news naming `principal`'s credential; returns the unwatch. */
  watch(principal: Principal, fn: () => void): () => void {
    const watcher = { tags: new Set(credentialTags(principal)), fn };
    this.#watchers.add(watcher);
    return () => this.#watchers.delete(watcher);
  }

  async close(): Promise<void> {
    this.#watchers.clear();
    await this.#stop?.();
  }

  #tell(tags: readonly string[] | undefined): void {
    for (const watcher of this.#watchers) {
      if (tags === undefined || tags.some((tag) => watcher.tags.has(tag))) watcher.fn();
    }
  }
}
