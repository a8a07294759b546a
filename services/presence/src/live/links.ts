import { LinkCloseReason } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { Bus, BusSubscription } from "@unimatrix/service-kit/bus";
import type { Clock } from "@unimatrix/service-kit/clock";
import type { Logger } from "pino";
import type { LogPosition, PresenceEvent } from "../store/rows";
import type { TransitionStore } from "../store/transitions";
import { LinkCommits } from "./link-commits";
import { parseSignal, presenceChannel, publishSignal, transitionSignal } from "./signal";

/** How long a tenant's channel stays subscribed after its last link closed. */
const SUBSCRIPTION_LINGER_MS = 30_000;

/** An open link as the registry sees it. */
export interface LinkHandle {
  readonly machineId: string;
  readonly tenantId: string;
  readonly linkId: string;
  /** Asks the link's stream to send `closed` with this reason and end. */
  close(reason: LinkCloseReason): void;
}

/** Options of a link registry. */
export interface LinkRegistryOptions {
  readonly transitions: TransitionStore;
  readonly bus: Bus;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly replicaId: string;
  readonly leaseMs: number;
  /**
   * Hands a committed transition whose log position is known to this replica's watchers before
   * its doorbell rings (the watch feed's `offerCommitted`); absent: watchers hear the doorbell.
   */
  readonly offer?: (event: PresenceEvent, position: LogPosition) => void;
}

/** What a committed transition's doorbell says besides the event. */
interface Rung {
  readonly link?: { readonly m: string; readonly l: string };
  /** Where the event sits in the tenant's log: the doorbell carries the event, this replica's watchers get it at once. */
  readonly position?: LogPosition | null;
}

/**
 * The links this replica holds, and their ownership in the database. Opens and closes of one
 * machine run one after another on this replica (a per-machine chain), and across replicas the
 * presence row lock orders them; the ownership row names the one current link.
 */
export class LinkRegistry {
  readonly #byMachine = new Map<string, LinkHandle>();
  readonly #chains = new Map<string, Promise<unknown>>();
  readonly #tenants = new Map<string, { count: number; sub: Promise<BusSubscription> }>();
  /** Signals of committed opens and closes on their way to the bus (`#ring`). */
  readonly #ringing = new Set<Promise<void>>();
  readonly #options: LinkRegistryOptions;
  /** Link opens and closes, committed per tenant in groups (one WAL flush for what gathered meanwhile). */
  readonly #commits: LinkCommits;
  /**
   * Set on graceful stop (a link saw the server's ShutdownReason): links end with `going_away`
   * and keep their ownership until the lease expires; reconcile stands down.
   */
  stopping = false;
  /** Set when the replica is killed (tests): nothing is written any more. */
  dead = false;

  constructor(options: LinkRegistryOptions) {
    this.#options = options;
    this.#commits = new LinkCommits(options.transitions);
  }

  get replicaId(): string {
    return this.#options.replicaId;
  }

  /** Number of links held here. */
  get size(): number {
    return this.#byMachine.size;
  }

  /** Machine ids of the links held here with their link ids. */
  held(): Map<string, string> {
    return new Map([...this.#byMachine].map(([machineId, handle]) => [machineId, handle.linkId]));
  }

  #serial<T>(machineId: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#chains.get(machineId) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const tail = next.catch(() => {});
    this.#chains.set(machineId, tail);
    void tail.then(() => {
      if (this.#chains.get(machineId) === tail) this.#chains.delete(machineId);
    });
    return next;
  }

  #lease(): Date {
    return new Date(this.#options.clock.now().getTime() + this.#options.leaseMs);
  }

  /** Publishes what a committed transition changed (and offers the event to this replica's watchers first). */
  async publish(tenantId: string, event: PresenceEvent | null, rung: Rung = {}) {
    this.#offer(event, rung);
    await this.#signal(tenantId, event, rung);
  }

  #offer(event: PresenceEvent | null, rung: Rung): void {
    if (event && rung.position) this.#options.offer?.(event, rung.position);
  }

  async #signal(tenantId: string, event: PresenceEvent | null, rung: Rung): Promise<void> {
    const { link, position = null } = rung;
    if (!event && !link) return;
    const extra = link ? { link } : {};
    await publishSignal(
      this.#options.bus,
      this.#options.logger,
      tenantId,
      event ? transitionSignal(event, position, extra) : extra,
    );
  }

  /**
   * `publish` without holding the link that committed: the database is the truth and the signal
   * only wakes readers. This replica's watchers get the event at once; the bus publish (its span,
   * message and Redis write) waits for the next check phase, so the daemon's `linked` (or its
   * stream's end), written in this turn, goes out first. The signals of this replica still leave
   * in commit order (immediates run in the order they were set, then one bus connection);
   * `settle` waits for the ones on their way.
   */
  #ring(tenantId: string, event: PresenceEvent | null, rung: Rung = {}): void {
    this.#offer(event, rung);
    const sent = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.#signal(tenantId, event, rung));
    this.#ringing.add(sent);
    const done = () => this.#ringing.delete(sent);
    sent.then(done, done);
  }

  /** Resolves once every signal rung so far was handed to the bus (the replica stops after it). */
  async settle(): Promise<void> {
    await Promise.all([...this.#ringing]);
  }

  /** Opens `handle`: records ownership, links the machine, replaces any previous link. */
  async open(handle: LinkHandle): Promise<void> {
    await this.#subscribe(handle.tenantId);
    try {
      await this.#serial(handle.machineId, async () => {
        const at = this.#options.clock.now();
        const opened = await this.#commits.open(
          handle.tenantId,
          handle.machineId,
          { replicaId: this.#options.replicaId, linkId: handle.linkId, leaseExpiresAt: this.#lease() },
          at,
        );
        const prior = this.#byMachine.get(handle.machineId);
        this.#byMachine.set(handle.machineId, handle);
        if (prior && prior.linkId !== handle.linkId) prior.close(LinkCloseReason.REPLACED);
        this.#ring(opened.tenantId, opened.event, {
          link: { m: handle.machineId, l: handle.linkId },
          position: opened.position,
        });
      });
    } catch (error) {
      await this.#unsubscribe(handle.tenantId);
      throw error;
    }
  }

  /** The link's stream ended (any reason): forget it and, unless replaced or stopping, unlink. */
  async closed(handle: LinkHandle): Promise<void> {
    try {
      await this.#serial(handle.machineId, async () => {
        if (this.#byMachine.get(handle.machineId) === handle) this.#byMachine.delete(handle.machineId);
        if (this.dead || this.stopping) return;
        const result = await this.#commits.close(
          handle.tenantId,
          handle.machineId,
          handle.linkId,
          this.#options.clock.now(),
        );
        if (result) this.#ring(result.tenantId, result.event, { position: result.position });
      });
    } catch (error) {
      // Reconcile finds the ownership row without a held link and unlinks it.
      this.#options.logger.error({ err: error, machineId: handle.machineId }, "unlink after link close failed");
    } finally {
      await this.#unsubscribe(handle.tenantId);
    }
  }

  /** Closes the local link of a machine with a reason, if one is held. */
  closeLocal(machineId: string, reason: LinkCloseReason): void {
    this.#byMachine.get(machineId)?.close(reason);
  }

  async #onSignal(message: string): Promise<void> {
    const signal = parseSignal(message);
    if (!signal) return;
    if (signal.revoked) this.closeLocal(signal.revoked, LinkCloseReason.REVOKED);
    const link = signal.link;
    if (!link) return;
    const local = this.#byMachine.get(link.m);
    if (!local || local.linkId === link.l) return;
    // Signals may arrive late: act only if the database agrees that another link is current.
    await this.#serial(link.m, async () => {
      const current = (await this.#options.transitions.currentLinks([link.m])).get(link.m);
      const held = this.#byMachine.get(link.m);
      if (held && current !== undefined && current !== held.linkId) {
        this.#byMachine.delete(link.m);
        held.close(LinkCloseReason.REPLACED);
      }
    });
  }

  async #subscribe(tenantId: string): Promise<void> {
    const entry = this.#tenants.get(tenantId);
    if (entry) {
      entry.count += 1;
      await entry.sub;
      return;
    }
    const sub = this.#options.bus.subscribe(presenceChannel(tenantId), (message) => {
      this.#onSignal(message).catch((error: unknown) =>
        this.#options.logger.warn({ err: error, tenantId }, "link signal handling failed"),
      );
    });
    this.#tenants.set(tenantId, { count: 1, sub });
    await sub;
  }

  async #unsubscribe(tenantId: string): Promise<void> {
    const entry = this.#tenants.get(tenantId);
    if (!entry) return;
    entry.count -= 1;
    if (entry.count > 0) return;
    // Linger: a flapping daemon would otherwise pay a SUBSCRIBE/UNSUBSCRIBE per reconnect.
    const timer = setTimeout(() => {
      if (entry.count > 0 || this.#tenants.get(tenantId) !== entry) return;
      this.#tenants.delete(tenantId);
      void entry.sub
        .then((sub) => sub.unsubscribe())
        .catch((error: unknown) => this.#options.logger.warn({ err: error, tenantId }, "unsubscribe failed"));
    }, SUBSCRIPTION_LINGER_MS);
    timer.unref();
  }

  /** Renews the lease of every link this replica holds. */
  async renewLeases(): Promise<void> {
    if (this.dead) return;
    await this.#options.transitions.renewLeases(this.#options.replicaId, this.#lease());
  }

  /**
   * Makes held links and ownership rows agree: a held link whose row is gone is claimed again
   * (linked), one whose row names another link is replaced, and a row of this replica without a
   * held link is unlinked.
   */
  async reconcileHeld(): Promise<void> {
    if (this.dead) return;
    const transitions = this.#options.transitions;
    const held = this.held();
    const current = await transitions.currentLinks([...held.keys()]);
    for (const [machineId, linkId] of held) {
      const owner = current.get(machineId);
      if (owner === linkId) continue;
      const handle = this.#byMachine.get(machineId);
      if (!handle || handle.linkId !== linkId) continue;
      if (owner === undefined) {
        await this.#serial(machineId, async () => {
          const opened = await transitions.linkOpened(
            machineId,
            { replicaId: this.#options.replicaId, linkId, leaseExpiresAt: this.#lease() },
            this.#options.clock.now(),
          );
          await this.publish(opened.tenantId, opened.event, {
            link: { m: machineId, l: linkId },
            position: opened.position,
          });
        }).catch((error: unknown) => {
          this.#options.logger.warn({ err: error, machineId }, "reclaiming a held link failed");
          handle.close(LinkCloseReason.REVOKED);
        });
      } else {
        this.#byMachine.delete(machineId);
        handle.close(LinkCloseReason.REPLACED);
      }
    }
    const owned = await transitions.ownedBy(this.#options.replicaId);
    for (const [machineId, linkId] of owned) {
      if (this.#byMachine.get(machineId)?.linkId === linkId) continue;
      await this.#serial(machineId, async () => {
        if (this.#byMachine.get(machineId)?.linkId === linkId) return;
        const result = await transitions.linkClosed(machineId, linkId, this.#options.clock.now());
        if (result) await this.publish(result.tenantId, result.event, { position: result.position });
      });
    }
  }
}
