import type { Server, Socket } from "node:net";
import * as grpc from "@grpc/grpc-js";
import type { BackoffOptions } from "./backoff";
import { openDoor, type ProbeResult } from "./door";
import {
  cubeResolver,
  type DroneIdentity,
  type DroneResolver,
  declaredResolver,
  linkResolver,
  NOT_A_DRONE_TOKEN,
} from "./drones";
import { type LinkEnd, PresenceLink } from "./link";
import type { DoorItem, DoorStatus } from "./protocol";
import { type SessionRecord, Spool } from "./spool";

/** Everything `unimatrix machine run` needs. */
export interface DaemonOptions {
  /** The machine's `umx_machine_…` token. */
  readonly token: string;
  /** Presence's gRPC target. */
  readonly presenceTarget: string;
  /** Cube's gRPC target, to verify drone session tokens; unset: sessions declare their drone id. */
  readonly cubeTarget?: string;
  /** TLS credentials for both targets; plaintext when unset. */
  readonly credentials?: grpc.ChannelCredentials;
  /** The local door (Unix socket path). */
  readonly doorPath: string;
  /** The spool's directory. */
  readonly spoolDir: string;
  readonly hostname: string;
  readonly agentVersion: string;
  readonly backoff?: BackoffOptions;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly probe?: (path: string) => Promise<ProbeResult>;
  readonly now?: () => number;
  /**
   * How old a session's last token check may be before a hook that carries the token has it
   * checked again (ms; default 60 s): a revoked token is found within this bound.
   */
  readonly reverifyMs?: number;
  /** One structured line per event (linked, notice, handed, …). */
  readonly log?: (event: string, fields?: Record<string, unknown>) => void;
}

/** TLS channel credentials: the system's roots, or the given CA bundle (PEM). */
export function tlsCredentials(ca: Buffer | null): grpc.ChannelCredentials {
  return grpc.credentials.createSsl(ca);
}

/** A running daemon. */
export interface Daemon {
  readonly doorPath: string;
  status(): DoorStatus;
  /** Resolves when the presence link ends for good (replaced, revoked, refused token). */
  readonly linkEnded: Promise<LinkEnd>;
  stop(): Promise<void>;
}

/** Most items one `take` hands out (the rest wait for the next hook). */
const MAX_ITEMS = 50;

const str = (value: unknown, field: string, max = 512): string => {
  if (typeof value !== "string" || value.length === 0 || value.length > max)
    throw new Error(`${field} must be a non-empty string of at most ${max} characters`);
  return value;
};
/** True when the resolver says the token itself is no good (revoked, expired, not a drone's). */
function isDeadToken(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === grpc.status.UNAUTHENTICATED || (error as Error).message === NOT_A_DRONE_TOKEN;
}

/** A session-end arrived while the session was being introduced: it stays ended. */
class SessionEnded extends Error {
  constructor() {
    super("the session ended while it was being introduced");
  }
}

const optionalStr = (value: unknown, field: string): string | undefined =>
  value === undefined || value === null || value === "" ? undefined : str(value, field, 4096);

/**
 * Starts the daemon: opens the door (stale-door rules, owner-only; a live one refuses this
 * daemon), then the spool, then the presence link. Notices from the link are spooled (dedup by id) before anything else; a hook takes them
 * for its session, and once it says they are in front of the model the daemon records that and
 * confirms each to presence (the `delivered` receipt). A notice already handed is confirmed
 * again whenever presence resends it, and never offered again.
 */
export async function runDaemon(options: DaemonOptions): Promise<Daemon> {
  const now = options.now ?? Date.now;
  const log = options.log ?? (() => {});
  // Opened only once the door is ours: the door is what makes this the one daemon on the spool.
  let spool!: Spool;
  let resolver!: DroneResolver;
  /** Notice ids offered on an open connection and not yet handed. */
  const reserved = new Map<Socket, Set<string>>();
  const isReserved = (id: string) => [...reserved.values()].some((ids) => ids.has(id));
  /** When each session's token was last checked (in memory: a restarted daemon checks again). */
  const verified = new Map<string, number>();
  const reverifyMs = options.reverifyMs ?? 60_000;
  /**
   * Each known session's drone token, in memory only (never journaled): what ties the session to
   * this machine again after a relink, and unties it at session-end.
   */
  const tokens = new Map<string, string>();
  /** Sessions presence has tied to this machine on the current link. */
  const bound = new Set<string>();
  /** Tokens of ended sessions still to untie (the link was down at their end); memory only. */
  const untiePending = new Set<string>();
  /**
   * Introductions under way, per session. A session-end marks them, so that one begun before it
   * (a relink's rebind, a hook's re-check) does not bring the ended session back when it resolves.
   */
  const introducing = new Map<string, Set<{ ended: boolean }>>();
  let link: PresenceLink | undefined;

  async function introduce(request: Record<string, unknown>, token: string): Promise<SessionRecord> {
    const harness = str(request.harness, "harness", 64);
    const session = str(request.session, "session");
    const key = `${harness}:${session}`;
    const ticket = { ended: false };
    const underWay = introducing.get(key) ?? new Set();
    introducing.set(key, underWay.add(ticket));
    let drone: DroneIdentity;
    try {
      drone = await resolver.resolve(token, optionalStr(request.droneId, "droneId"));
    } finally {
      underWay.delete(ticket);
      if (underWay.size === 0 && introducing.get(key) === underWay) introducing.delete(key);
    }
    if (ticket.ended) {
      // The session ended meanwhile. Presence serves a link's session requests concurrently, so
      // this introduction's tie may have landed after the session-end's untie: untie it again.
      if (drone.bound) await untie(token);
      throw new SessionEnded();
    }
    const { bound: tied, ...identity } = drone;
    const record: SessionRecord = { harness, session, ...identity };
    verified.set(key, now());
    tokens.set(key, token);
    if (tied) bound.add(key);
    else bound.delete(key);
    const known = spool.session(harness, session);
    if (known?.droneId !== record.droneId || known.expiresAt !== record.expiresAt) spool.putSession(record);
    log("session", { harness, session, droneId: record.droneId, bound: tied === true });
    return record;
  }

  /** Forgets a session: its record, its token, whether it was checked and tied. */
  function forget(harness: string, session: string): void {
    const key = `${harness}:${session}`;
    for (const ticket of introducing.get(key) ?? []) ticket.ended = true;
    spool.forgetSession(harness, session);
    verified.delete(key);
    tokens.delete(key);
    bound.delete(key);
  }

  /**
   * Unties an ended session's drone session from the machine. Not linked, or presence unable to
   * ask cube: kept, and tried again at the next link. Answers true, or why not (yet).
   */
  async function untie(token: string): Promise<true | string> {
    const answer = await (link ?? { bindSession: () => Promise.reject(new Error("not linked")) })
      .bindSession(token, true)
      .catch((error: Error) => error.message);
    if (typeof answer !== "string" && answer.code === 0) {
      untiePending.delete(token);
      return true;
    }
    const retry = typeof answer === "string" || answer.code === grpc.status.UNAVAILABLE;
    if (retry) untiePending.add(token);
    else untiePending.delete(token);
    return typeof answer === "string" ? answer : `code ${answer.code}: ${answer.message}`;
  }

  /** On every new link: unties what ended meanwhile, then ties each session whose token it holds again. */
  async function rebindAll(): Promise<void> {
    for (const token of [...untiePending]) await untie(token);
    bound.clear();
    for (const [key, token] of [...tokens]) {
      if (tokens.get(key) !== token) continue; // ended (or introduced again) while this loop ran
      const [harness = "", session = ""] = [key.slice(0, key.indexOf(":")), key.slice(key.indexOf(":") + 1)];
      try {
        await introduce({ harness, session }, token);
      } catch (error) {
        if (!isDeadToken(error)) continue;
        forget(harness, session);
        log("session_token_dead", { harness, session });
      }
    }
  }

  function liveSession(harness: string, session: string): SessionRecord | undefined {
    const record = spool.session(harness, session);
    if (record && record.expiresAt > 0 && record.expiresAt <= now()) {
      spool.forgetSession(harness, session);
      log("session_expired", { harness, session });
      return undefined;
    }
    return record;
  }

  async function handle(request: Record<string, unknown>, connection: Socket): Promise<unknown> {
    switch (request.op) {
      case "hello": {
        const record = await introduce(request, str(request.droneToken, "droneToken", 4096));
        const tied = bound.has(`${record.harness}:${record.session}`);
        return { ok: true, droneId: record.droneId, cubeId: record.cubeId, bound: tied };
      }
      case "take": {
        const harness = str(request.harness, "harness", 64);
        const session = str(request.session, "session");
        let record = liveSession(harness, session);
        const token = optionalStr(request.droneToken, "droneToken");
        const key = `${harness}:${session}`;
        const checkedAt = verified.get(key);
        if (token && (!record || checkedAt === undefined || now() - checkedAt >= reverifyMs)) {
          try {
            record = await introduce(request, token);
          } catch (error) {
            if (error instanceof SessionEnded) return { ok: true, items: [], unknownSession: true };
            if (isDeadToken(error)) {
              // The drone's token died: forget the session; its items wait for a live one.
              forget(harness, session);
              log("session_token_dead", { harness, session });
              return { ok: true, items: [], unknownSession: true };
            }
            // Cube unreachable: a known session keeps working on what was checked before.
            if (!record) throw error;
            log("session_check_failed", { harness, session, error: (error as Error).message });
          }
        }
        if (!record) return { ok: true, items: [], unknownSession: true };
        const items: DoorItem[] = spool
          .pendingFor(record.droneId)
          .filter((n) => !isReserved(n.id))
          .slice(0, MAX_ITEMS)
          .map((n) => ({ id: n.id, cubeId: n.cubeId, entryId: n.entryId, text: n.text }));
        if (items.length > 0) {
          const mine = reserved.get(connection) ?? new Set<string>();
          for (const item of items) mine.add(item.id);
          reserved.set(connection, mine);
          (connection as Socket & { sessionKey?: string }).sessionKey = `${harness}:${session}`;
        }
        return { ok: true, items };
      }
      case "handed": {
        if (!Array.isArray(request.ids)) throw new Error("ids must be an array of notice ids");
        const mine = reserved.get(connection) ?? new Set<string>();
        const ids = request.ids.filter((id): id is string => typeof id === "string" && mine.has(id));
        const sessionKey = (connection as Socket & { sessionKey?: string }).sessionKey ?? "";
        const fresh = spool.markHanded(ids, sessionKey);
        for (const id of ids) mine.delete(id);
        for (const id of fresh) {
          const sent = link?.confirm(id) ?? false;
          log("handed", { id, session: sessionKey, confirmed: sent });
        }
        return { ok: true, handed: fresh.length };
      }
      case "bye": {
        const harness = str(request.harness, "harness", 64);
        const session = str(request.session, "session");
        const token = optionalStr(request.droneToken, "droneToken") ?? tokens.get(`${harness}:${session}`);
        forget(harness, session);
        // Untie the drone session from this machine (its notices stop coming here); best effort.
        const unbound = token ? await untie(token) : false;
        log("session_end", { harness, session, unbound });
        return { ok: true };
      }
      case "status":
        return status();
      default:
        throw new Error(`unknown op ${JSON.stringify(request.op)}`);
    }
  }

  const status = (): DoorStatus => ({
    ok: true,
    linked: link?.linked ?? false,
    machineId: link?.machineId ?? "",
    pending: spool.pendingCount(),
    handed: spool.handedIds().length,
    sessions: spool.sessions().length,
    links: link?.links ?? 0,
  });

  const door: Server = await openDoor(options.doorPath, handle, {
    ...(options.probe ? { probe: options.probe } : {}),
    onClose: (connection) => reserved.delete(connection),
  });
  try {
    spool = Spool.open(options.spoolDir, now);
  } catch (error) {
    door.close();
    throw error;
  }
  const fallback = options.cubeTarget ? cubeResolver(options.cubeTarget, options.credentials) : declaredResolver();
  resolver = linkResolver(
    {
      get linked() {
        return link?.linked ?? false;
      },
      bindSession: (token, unbind) =>
        link ? link.bindSession(token, unbind) : Promise.reject(new Error("not linked to presence")),
    },
    fallback,
  );
  const connections = new Set<Socket>();
  door.on("connection", (socket: Socket) => {
    connections.add(socket);
    socket.once("close", () => connections.delete(socket));
  });
  log("door_open", { path: options.doorPath });

  link = new PresenceLink({
    target: options.presenceTarget,
    token: options.token,
    ...(options.credentials ? { credentials: options.credentials } : {}),
    hostname: options.hostname,
    agentVersion: options.agentVersion,
    ...(options.backoff ? { backoff: options.backoff } : {}),
    ...(options.sleep ? { sleep: options.sleep } : {}),
    onEvent: (event, fields) => {
      log(event, fields);
      if (event === "linked") void rebindAll();
    },
    onNotice: (notice) => {
      const outcome = spool.add(notice);
      if (outcome === "handed") link?.confirm(notice.id);
      log("notice", { id: notice.id, entryId: notice.entryId, droneId: notice.droneId, outcome });
    },
  });

  let stopping: Promise<void> | undefined;
  return {
    doorPath: options.doorPath,
    status,
    linkEnded: link.ended,
    stop() {
      stopping ??= (async () => {
        await link.stop();
        const closed = new Promise<void>((resolve) => door.close(() => resolve()));
        for (const connection of connections) connection.destroy();
        await closed;
        spool.close();
        resolver.close();
        log("stopped");
      })();
      return stopping;
    },
  };
}
