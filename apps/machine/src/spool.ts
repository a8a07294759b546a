import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";

/** A notice as the daemon keeps it: the Link's `LinkNotice` fields it hands to a session. */
export interface SpooledNotice {
  readonly id: string;
  readonly cubeId: string;
  readonly droneId: string;
  readonly droneLabel: string;
  readonly entryId: string;
  readonly text: string;
}

/** A host session introduced at the door, tied to one drone. */
export interface SessionRecord {
  /** The agent host, e.g. `claude-code`. */
  readonly harness: string;
  /** The host's own session id (Claude Code's `session_id`). */
  readonly session: string;
  readonly droneId: string;
  readonly cubeId: string;
  /** When the drone session token expires (ms since epoch); 0 when unknown. */
  readonly expiresAt: number;
}

type Entry =
  | { t: "notice"; n: SpooledNotice; at: number }
  | { t: "handed"; id: string; session: string; at: number }
  | { t: "session"; s: SessionRecord }
  | { t: "forget"; harness: string; session: string };

interface Held {
  readonly notice: SpooledNotice;
  readonly receivedAt: number;
  handedAt?: number;
  handedTo?: string;
}

/** What `Spool.add` found: a notice it had never seen, one still waiting, or one already handed on. */
export type AddOutcome = "new" | "pending" | "handed";

/** How long a handed notice's id is remembered, so a late resend is confirmed and never shown again. */
const HANDED_RETENTION_MS = 7 * 24 * 3_600_000;
const JOURNAL = "journal.ndjson";

const sessionKey = (harness: string, session: string) => `${harness}\u0000${session}`;

/**
 * The daemon's crash-safe notice spool: an append-only journal (one JSON line per change, each
 * fsynced before the change counts), replayed at start and compacted by writing a temporary file,
 * fsyncing it and renaming it over the journal. A torn last line (a crash mid-append) is ignored:
 * the change it held never counted. Not safe for two processes; the door guarantees one daemon.
 */
export class Spool {
  readonly #dir: string;
  readonly #now: () => number;
  readonly #notices = new Map<string, Held>();
  readonly #sessions = new Map<string, SessionRecord>();
  #fd = -1;
  #lines = 0;

  private constructor(dir: string, now: () => number) {
    this.#dir = dir;
    this.#now = now;
  }

  /** Opens (creating, owner-only) the spool in `dir`, replays its journal and compacts it. */
  static open(dir: string, now: () => number = Date.now): Spool {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const spool = new Spool(dir, now);
    spool.#replay();
    spool.compact();
    return spool;
  }

  #replay(): void {
    let text: string;
    try {
      text = readFileSync(join(this.#dir, JOURNAL), "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw error;
    }
    for (const line of text.split("\n")) {
      if (line.length === 0) continue;
      let entry: Entry;
      try {
        entry = JSON.parse(line) as Entry;
      } catch {
        continue; // a torn append: it never counted
      }
      this.#apply(entry);
    }
  }

  #apply(entry: Entry): void {
    switch (entry.t) {
      case "notice":
        if (!this.#notices.has(entry.n.id)) this.#notices.set(entry.n.id, { notice: entry.n, receivedAt: entry.at });
        break;
      case "handed": {
        const held = this.#notices.get(entry.id);
        if (held && held.handedAt === undefined) {
          held.handedAt = entry.at;
          held.handedTo = entry.session;
        }
        break;
      }
      case "session":
        this.#sessions.set(sessionKey(entry.s.harness, entry.s.session), entry.s);
        break;
      case "forget":
        this.#sessions.delete(sessionKey(entry.harness, entry.session));
        break;
    }
  }

  #append(entries: Entry[]): void {
    if (this.#fd < 0) this.#fd = openSync(join(this.#dir, JOURNAL), "a", 0o600);
    writeSync(this.#fd, entries.map((e) => `${JSON.stringify(e)}\n`).join(""));
    fsyncSync(this.#fd);
    for (const entry of entries) this.#apply(entry);
    this.#lines += entries.length;
    if (this.#lines > 1_000 && this.#lines > 4 * (this.#notices.size + this.#sessions.size)) this.compact();
  }

  /** Records a notice from the Link (durably, before the caller acts on it); dedups by id. */
  add(notice: SpooledNotice): AddOutcome {
    const held = this.#notices.get(notice.id);
    if (held) return held.handedAt === undefined ? "pending" : "handed";
    const { id, cubeId, droneId, droneLabel, entryId, text } = notice;
    this.#append([{ t: "notice", n: { id, cubeId, droneId, droneLabel, entryId, text }, at: this.#now() }]);
    return "new";
  }

  /** Notices for `droneId` not yet handed to any session, oldest first. */
  pendingFor(droneId: string): SpooledNotice[] {
    const out: SpooledNotice[] = [];
    for (const held of this.#notices.values()) {
      if (held.handedAt === undefined && held.notice.droneId === droneId) out.push(held.notice);
    }
    return out;
  }

  /** Every notice not yet handed on (for status). */
  pendingCount(): number {
    let n = 0;
    for (const held of this.#notices.values()) if (held.handedAt === undefined) n += 1;
    return n;
  }

  /** True when the notice was handed into a session's context (it must be confirmed, never shown again). */
  isHanded(id: string): boolean {
    return this.#notices.get(id)?.handedAt !== undefined;
  }

  /** Durably marks notices as handed to `session`; only those still pending are marked. Returns them. */
  markHanded(ids: readonly string[], session: string): string[] {
    const at = this.#now();
    const fresh = ids.filter((id) => {
      const held = this.#notices.get(id);
      return held !== undefined && held.handedAt === undefined;
    });
    if (fresh.length > 0) this.#append(fresh.map((id) => ({ t: "handed" as const, id, session, at })));
    return fresh;
  }

  /** Ids handed on but kept for confirmation (every one of them is confirmed on each new link). */
  handedIds(): string[] {
    return [...this.#notices.values()].filter((h) => h.handedAt !== undefined).map((h) => h.notice.id);
  }

  /** Durably records (or replaces) a session. */
  putSession(record: SessionRecord): void {
    this.#append([{ t: "session", s: record }]);
  }

  /** Durably forgets a session. */
  forgetSession(harness: string, session: string): void {
    if (this.#sessions.has(sessionKey(harness, session))) this.#append([{ t: "forget", harness, session }]);
  }

  session(harness: string, session: string): SessionRecord | undefined {
    return this.#sessions.get(sessionKey(harness, session));
  }

  sessions(): SessionRecord[] {
    return [...this.#sessions.values()];
  }

  /**
   * Rewrites the journal with only what still matters (pending notices, handed ids within their
   * retention, live sessions): temporary file, fsync, rename, fsync of the directory.
   */
  compact(): void {
    const now = this.#now();
    for (const [id, held] of this.#notices) {
      if (held.handedAt !== undefined && now - held.handedAt > HANDED_RETENTION_MS) this.#notices.delete(id);
    }
    for (const [key, s] of this.#sessions) if (s.expiresAt > 0 && s.expiresAt <= now) this.#sessions.delete(key);
    const entries: Entry[] = [];
    for (const held of this.#notices.values()) {
      entries.push({ t: "notice", n: held.notice, at: held.receivedAt });
      if (held.handedAt !== undefined)
        entries.push({ t: "handed", id: held.notice.id, session: held.handedTo ?? "", at: held.handedAt });
    }
    for (const s of this.#sessions.values()) entries.push({ t: "session", s });
    const temp = join(this.#dir, `${JOURNAL}.${process.pid}.tmp`);
    const fd = openSync(temp, "w", 0o600);
    try {
      writeSync(fd, entries.map((e) => `${JSON.stringify(e)}\n`).join(""));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
    renameSync(temp, join(this.#dir, JOURNAL));
    const dirFd = openSync(this.#dir, "r");
    try {
      fsyncSync(dirFd);
    } finally {
      closeSync(dirFd);
    }
    this.#lines = entries.length;
  }

  close(): void {
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
  }
}
