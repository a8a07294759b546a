import { status } from "@grpc/grpc-js";
import type { Principal } from "@unimatrix/service-kit/auth";
import { sleep } from "@unimatrix/service-kit/clock";
import { toStatus } from "@unimatrix/service-kit/grpc";
import { type Followed, follow, isGoingAway } from "./follow";
import { deniesAccess, Member, type SharedKind, type SharedMember } from "./shared-member";

/** Counters of one replica's shared upstreams (metrics and tests). */
export interface SharedUpstreamStats {
  /** Upstream streams open now. */
  readonly upstreams: number;
  /** Consumers attached to them now. */
  readonly members: number;
  /** Upstream streams opened since start (a failover's re-open is not counted, a new hub is). */
  readonly opened: number;
}

/** How often members of other credentials than the one the upstream reads as are checked without news (cached answers allowed). */
const MEMBER_RECHECK_MS = 10_000;

/** Most member checks in flight per hub. */
const CHECKS_IN_FLIGHT = 16;

/**
 * Who sees the same activity stream: the sessions of one drone see what the drone sees; every
 * other principal of a tenant (user, client, operator) sees every entry and no notification.
 */
function viewerClass(principal: Principal): string {
  if (principal.kind === "drone-session") return `drone:${principal.droneId}`;
  return principal.tenantId === null ? "operator" : `tenant:${principal.tenantId}`;
}

/** The ids access news names a principal by: itself, and for a drone session its drone and client. */
export function subjectsOf(principal: Principal): string[] {
  if (principal.kind === "drone-session") return [principal.subjectId, principal.droneId, principal.clientId];
  return [principal.subjectId];
}

/** The sharing key of an upstream: what it reads and who sees the same of it (`viewerClass`). */
export function sharingKey(what: string, principal: Principal): string {
  return `${what}|${viewerClass(principal)}`;
}

/**
 * One shared upstream: read as one member (the reader), its messages handed to every admitted
 * member. A member joining a running hub is admitted after its own access check; when the
 * upstream says access changed, every other credential is checked again (fresh) before anything
 * further is passed on; when the reader itself loses access, it alone is told, and the hub
 * re-opens after its position as another member that still may read.
 */
class Hub<M> {
  readonly members = new Set<Member<M>>();
  readonly controller = new AbortController();
  /** Set once the upstream's ready passed: later joiners start from `position` with a made-up ready. */
  live = false;
  /** The position of the last message passed on (entry cursor, or the ready/heartbeat position). */
  position: string | undefined;
  /** No new member may join: the stream is over (final event, error, or no members left). */
  closed = false;
  /** The member the upstream is read as now, and the signal of that reading (aborted when it leaves). */
  #reader: Member<M> | undefined;
  #reading: AbortController | undefined;
  #recheck: NodeJS.Timeout | undefined;
  readonly #admitting = new Map<string, Promise<void>>();
  /** Admitted members per credential (a joiner of one that is here is vouched for). */
  readonly #perCredential = new Map<string, number>();

  constructor(
    private readonly kind: SharedKind<M>,
    private readonly onClose: () => void,
  ) {}

  /** Opens the upstream as the first member. */
  start(first: SharedMember<M>, signal: AbortSignal): Member<M> {
    const member = new Member<M>(this.kind, first, (m) => this.#leave(m));
    this.#reader = member;
    this.#enter(member, signal);
    this.#recheck = setInterval(() => void this.#checkMembers(false), MEMBER_RECHECK_MS);
    this.#recheck.unref();
    void this.#run();
    return member;
  }

  /**
   * A joiner of a running hub: admitted once its own check passes — at once when a member of its
   * credential is here already (checked, and checked again with it); joiners of one credential
   * arriving together share one check — starting at the hub's position.
   */
  join(spec: SharedMember<M>, signal: AbortSignal): Member<M> {
    const member = new Member<M>(this.kind, spec, (m) => this.#leave(m));
    const vouched = (this.#perCredential.get(spec.credential) ?? 0) > 0;
    void (async () => {
      let backoff = 100;
      while (!vouched) {
        if (signal.aborted || this.closed) return member.end();
        try {
          await this.#admission(spec);
          break;
        } catch (error) {
          if (!isGoingAway(error)) return member.fail(error);
          spec.onRetry?.(error);
          await sleep(backoff * (0.5 + Math.random() / 2), signal);
          backoff = Math.min(backoff * 2, 2_000);
        }
      }
      if (signal.aborted || this.closed) return member.end();
      if (this.live && this.position !== undefined)
        member.push({ message: this.kind.readyAt(this.position), resumed: false });
      this.#enter(member, signal);
    })();
    return member;
  }

  /** A joiner's check; joiners of one credential arriving together share one. */
  #admission(spec: SharedMember<M>): Promise<void> {
    let pending = this.#admitting.get(spec.credential);
    if (!pending) {
      pending = spec.check(false);
      this.#admitting.set(spec.credential, pending);
      const forget = () => this.#admitting.delete(spec.credential);
      pending.then(forget, forget);
    }
    return pending;
  }

  #enter(member: Member<M>, signal: AbortSignal): void {
    this.members.add(member);
    const { credential } = member.spec;
    this.#perCredential.set(credential, (this.#perCredential.get(credential) ?? 0) + 1);
    // A consumer that goes away leaves at once, whether or not it is reading.
    const leave = () => {
      member.end();
      this.#leave(member);
    };
    if (signal.aborted) leave();
    else signal.addEventListener("abort", leave, { once: true });
  }

  #leave(member: Member<M>): void {
    if (!this.members.delete(member)) return;
    const { credential } = member.spec;
    const left = (this.#perCredential.get(credential) ?? 1) - 1;
    if (left > 0) this.#perCredential.set(credential, left);
    else this.#perCredential.delete(credential);
    if (this.members.size === 0) this.#close();
    // The upstream always reads as a member that is here: re-open it as another one.
    else if (member === this.#reader) this.#reading?.abort();
  }

  #close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.#recheck) clearInterval(this.#recheck);
    this.controller.abort();
    for (const member of this.members) member.end();
    this.onClose();
  }

  /**
   * Ends every member whose credential no longer may read (one check per credential; the reader's
   * is skipped: the upstream checks it). `named`: only members news names (empty: everyone).
   */
  async #checkMembers(fresh: boolean, named: readonly string[] = []): Promise<void> {
    const byCredential = new Map<string, Member<M>[]>();
    for (const member of this.members) {
      if (member.spec.credential === this.#reader?.spec.credential) continue;
      if (named.length > 0 && !member.spec.subjects.some((id) => named.includes(id))) continue;
      const group = byCredential.get(member.spec.credential);
      if (group) group.push(member);
      else byCredential.set(member.spec.credential, [member]);
    }
    const groups = [...byCredential.values()];
    const worker = async () => {
      for (let group = groups.pop(); group; group = groups.pop()) {
        try {
          await (group[0] as Member<M>).spec.check(fresh);
        } catch (error) {
          if (!deniesAccess(error)) continue; // could not ask: keep them, the next check decides
          const reason = `access to this stream was removed (${status[toStatus(error).code]})`;
          for (const member of group) {
            member.finish(this.kind.revokedFor(reason));
            this.#leave(member);
          }
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CHECKS_IN_FLIGHT, groups.length) }, worker));
  }

  /** The next member to read as: the current reader while it stays, else any admitted member. */
  #nextReader(): Member<M> | undefined {
    if (this.#reader && this.members.has(this.#reader) && !this.#reader.ended) return this.#reader;
    for (const member of this.members) if (!member.ended) return member;
    return undefined;
  }

  async #run(): Promise<void> {
    try {
      for (;;) {
        const reader = this.#nextReader();
        if (!reader || this.closed) return;
        this.#reader = reader;
        const reading = new AbortController();
        this.#reading = reading;
        const signal = AbortSignal.any([this.controller.signal, reading.signal]);
        let lost = false;
        try {
          const followed = follow({
            open: (after) => reader.spec.open(after, signal),
            after: this.position,
            step: this.kind.step,
            signal,
            onRetry: (error) => {
              for (const member of this.members) member.spec.onRetry?.(error);
            },
          });
          for await (const item of followed) {
            const named = this.kind.accessNews(item.message);
            if (named) {
              // Hold what follows until the named members' access is known again (the service holds too).
              await this.#checkMembers(true, named);
              continue;
            }
            if (this.kind.isRevoked(item.message)) {
              // The reader lost access: it alone is told; the others go on as someone else.
              lost = true;
              reader.finish(item.message);
              this.#leave(reader);
              break;
            }
            const step = this.kind.step(item.message);
            this.position = step.cursor ?? step.start ?? this.position;
            if (this.kind.isReady(item.message)) this.live = true;
            for (const member of this.members) member.push(item);
            if (step.final) this.#close();
          }
        } catch (error) {
          // Not going-away: the answer to the reader (the others are asked for themselves below).
          lost = true;
          reader.fail(error);
          this.#leave(reader);
        }
        if (this.closed) return;
        if (lost) {
          // Whoever shares the lost reader's credential is asked too.
          this.#reader = undefined;
          await this.#checkMembers(true);
        } else if (!reading.signal.aborted) {
          // The upstream ended for good (a final event passed on to every member).
          return;
        }
        // Else the reader left: read on as another member, after the position.
      }
    } finally {
      this.#close();
    }
  }
}

/**
 * One gateway replica's shared upstream subscriptions: streams that read the same thing from the
 * head and see the same of it (`sharingKey`: same cube, same viewer class — e.g. a console's
 * tabs, a team's dashboards, an agent's several readers) share one upstream server stream,
 * followed across replica failover (`follow`), and every message is handed to each member once,
 * in order. Each member's own access is checked when it joins, again on the upstream's access
 * news (fresh) and every `MEMBER_RECHECK_MS`; a member that lost it gets its own access_revoked.
 * A member that falls `MEMBER_MAX_QUEUE` messages behind is closed as too slow at its last cursor
 * (it reconnects with it and resumes on a stream of its own), so a slow reader never holds the
 * others back. A stream that resumes from a cursor does not share: its position is its own.
 */
export class SharedUpstreams {
  readonly #hubs = new Map<string, Hub<unknown>>();
  #opened = 0;

  /**
   * The messages of the upstream `key` from now on (the first joiner opens it as itself; a joiner
   * of a running one is admitted after its check, with a ready at the current position first).
   * Ends when the upstream ends or `signal` aborts; throws the member's own refusal.
   */
  join<M>(key: string, kind: SharedKind<M>, member: SharedMember<M>, signal: AbortSignal): AsyncIterable<Followed<M>> {
    const running = this.#hubs.get(key) as Hub<M> | undefined;
    if (running && !running.closed) return running.join(member, signal);
    this.#opened += 1;
    const hub: Hub<M> = new Hub<M>(kind, () => {
      if (this.#hubs.get(key) === (hub as Hub<unknown>)) this.#hubs.delete(key);
    });
    this.#hubs.set(key, hub as Hub<unknown>);
    return hub.start(member, signal);
  }

  stats(): SharedUpstreamStats {
    let members = 0;
    for (const hub of this.#hubs.values()) members += hub.members.size;
    return { upstreams: this.#hubs.size, members, opened: this.#opened };
  }
}
