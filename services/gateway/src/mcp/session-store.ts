import { randomUUID } from "node:crypto";
import type { LoggingLevel } from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "@unimatrix/service-kit/clock";
import { SharedValues } from "../fleet/kv";
import { LeaseTable } from "../fleet/leases";
import type { SharedStore } from "../fleet/shared";
import { Sealer } from "./sealer";

/** The seat a session acts as after `seat_attach`. */
export interface SeatRecord {
  readonly cubeId: string;
  readonly roleId: string;
  readonly droneId: string;
  /** The drone session token (a credential of its own): kept only sealed in the shared store. */
  readonly token: string;
}

/** What the fleet knows of one MCP session: every replica serves it from this. */
export interface SessionRecord {
  /** SHA-256 of the bearer token that opened it (never the token): only that bearer may use it. */
  readonly credentialKey: string;
  readonly seat?: SeatRecord | undefined;
  /** Where the seat started (the cube's head when it was attached): a push stream open at attach starts here. */
  readonly cursor?: string | undefined;
  /** The drone's inbox position as this session last read it (where a filtered `log_wait` starts). */
  readonly inbox?: string | undefined;
  /** The level set with `logging/setLevel` (push notifications below it are not sent). */
  readonly logLevel?: LoggingLevel | undefined;
}

type Stored = Omit<SessionRecord, "seat"> & { seat?: Omit<SeatRecord, "token"> & { sealed: string } };

/**
 * MCP sessions in the fleet's shared store (Redis; this replica's memory without it): expiring
 * after `idleMs` unused, at most `maxPerCredential` per bearer across every replica. The drone
 * session token is sealed (AES-256-GCM, a key derived from the internal key) before it is stored.
 */
export class McpSessionStore {
  readonly #values: SharedValues;
  readonly #leases: LeaseTable;
  readonly #sealer: Sealer;
  readonly #store: SharedStore;

  constructor(
    store: SharedStore,
    clock: Clock,
    internalKey: string,
    readonly idleMs: number,
    readonly maxPerCredential: number,
  ) {
    this.#store = store;
    this.#values = new SharedValues(store, "mcp:session", clock);
    this.#leases = new LeaseTable(store, "mcp:held", clock);

    this.#sealer = new Sealer(internalKey, "unimatrix mcp session seal");
  }

  /** True while Redis is unreachable: a session missing here may live on in the fleet. */
  get degraded(): boolean {
    return this.#store.degraded;
  }

  /** A new session of `credentialKey`; undefined when it already holds `maxPerCredential`. */
  async create(credentialKey: string): Promise<string | undefined> {
    const id = randomUUID();
    if (!(await this.#leases.acquire(credentialKey, id, this.maxPerCredential, this.idleMs))) return undefined;
    await this.#values.set(id, JSON.stringify({ credentialKey } satisfies Stored), this.idleMs);
    return id;
  }

  /** How many sessions `credentialKey` holds, fleet-wide. */
  held(credentialKey: string): Promise<number> {
    return this.#leases.count(credentialKey);
  }

  /** The session, or undefined when unknown or expired. */
  async get(id: string): Promise<SessionRecord | undefined> {
    const text = await this.#values.get(id);
    if (text === undefined) return undefined;
    const stored = JSON.parse(text) as Stored;
    if (!stored.seat) return stored as SessionRecord;
    const { sealed, ...seat } = stored.seat;
    return { ...stored, seat: { ...seat, token: this.#unseal(sealed) } };
  }

  /** Marks the session used now: its expiry (and its place under the cap) move `idleMs` ahead. */
  async touch(id: string, record: SessionRecord): Promise<void> {
    await Promise.all([this.#values.touch(id, this.idleMs), this.#leases.renew(record.credentialKey, id, this.idleMs)]);
  }

  /** Merges `patch` into the session (read, change, write: the last writer of a field wins). */
  async update(id: string, patch: Partial<Omit<SessionRecord, "credentialKey">>): Promise<SessionRecord | undefined> {
    const current = await this.get(id);
    if (!current) return undefined;
    const next = { ...current, ...patch };
    const { seat, ...rest } = next;
    const stored: Stored = seat
      ? {
          ...rest,
          seat: { cubeId: seat.cubeId, roleId: seat.roleId, droneId: seat.droneId, sealed: this.#seal(seat.token) },
        }
      : rest;
    await this.#values.set(id, JSON.stringify(stored), this.idleMs);
    return next;
  }

  /** Ends the session fleet-wide. */
  async delete(id: string, credentialKey: string): Promise<void> {
    await Promise.all([this.#values.delete(id), this.#leases.release(credentialKey, id)]);
  }

  #seal(token: string): string {
    return this.#sealer.seal(token);
  }

  #unseal(sealed: string): string {
    return this.#sealer.unseal(sealed);
  }
}
