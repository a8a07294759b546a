import type { Principal } from "@unimatrix/service-kit/auth";
import type { CubeDeps } from "../deps";
import { revokedReason } from "../reads/credentials";
import { READ } from "../rules/access";
import { type Viewer, viewerOf } from "../rules/visibility";
import { requireAccess } from "../store/access";

/** What an access re-check found: the viewer now, that the stream must end (and why), or nothing (the check failed). */
export type Recheck =
  | { readonly kind: "viewer"; readonly viewer: Viewer }
  | { readonly kind: "revoked"; readonly reason: string }
  | { readonly kind: "unknown" };

/** One re-check shared by the streams of one (principal, credential, cube). */
interface Shared {
  /** Its statements were sent: a stream that must see what happened after it asked cannot join any more. */
  sent: boolean;
  /** When its statements were sent (ms, on the deps' clock). */
  sentAt: number;
  readonly outcome: Promise<Recheck>;
}

/**
 * The replica's access re-checks of open streams, batched: streams of the same principal,
 * credential and cube share one check (two statements) instead of one each. A fleet's streams
 * open together and re-check together (an access doorbell reaches every stream of a cube at
 * once; periodic re-checks fall on their heartbeats), and a thousand streams re-checking one by
 * one put two thousand statements in line with the appends and the deliveries.
 *
 * A check asked for `fresh` (an access doorbell rang, or the bus reconnected) joins only a check
 * whose statements have not been sent yet, so what it reads is never older than the news: a
 * stale viewer never filters an item it may no longer see. The periodic safety net (nothing is
 * known to have changed) also takes a check sent less than `reuseMs` ago, in flight or done.
 */
export class AccessRechecks {
  readonly #shared = new Map<string, Shared>();

  constructor(
    private readonly deps: CubeDeps,
    private readonly reuseMs: number,
  ) {}

  /** The access of `principal` (whose stream was opened with `credentialId`) to `cubeId` now. */
  check(principal: Principal, cubeId: string, credentialId: string | undefined, fresh: boolean): Promise<Recheck> {
    const key = `${cubeId}|${principal.kind}:${principal.subjectId}|${credentialId ?? ""}`;
    const known = this.#shared.get(key);
    if (known && (!known.sent || (!fresh && this.#now() - known.sentAt < this.reuseMs))) return known.outcome;
    let settle: (outcome: Promise<Recheck>) => void = () => {};
    const shared: Shared = {
      sent: false,
      sentAt: 0,
      outcome: new Promise<Recheck>((resolve) => {
        settle = resolve;
      }),
    };
    this.#shared.set(key, shared);
    // Sent after the streams that ask in this turn of the event loop (one doorbell reaches all
    // of a cube's streams in one turn) have joined.
    queueMicrotask(() => {
      shared.sent = true;
      shared.sentAt = this.#now();
      settle(this.#run(principal, cubeId, credentialId));
    });
    void shared.outcome.finally(() => {
      const forget = setTimeout(() => {
        if (this.#shared.get(key) === shared) this.#shared.delete(key);
      }, this.reuseMs);
      forget.unref();
    });
    return shared.outcome;
  }

  #now(): number {
    return this.deps.clock.now().getTime();
  }

  async #run(principal: Principal, cubeId: string, credentialId: string | undefined): Promise<Recheck> {
    const reason = await revokedReason(this.deps, principal, credentialId).catch(() => undefined);
    if (reason === undefined) return { kind: "unknown" };
    if (reason !== null) return { kind: "revoked", reason };
    try {
      const s = await requireAccess(this.deps.prisma, principal, cubeId, READ, "reading");
      return { kind: "viewer", viewer: viewerOf(s) };
    } catch {
      return { kind: "revoked", reason: "access to the cube was removed" };
    }
  }
}
