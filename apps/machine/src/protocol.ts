import { connect } from "node:net";

/**
 * The door's local protocol (newline-delimited JSON over the Unix socket; one answer line per
 * request line, in order, `{"ok": false, "error": "…"}` on a refusal):
 *
 * - `hello {harness, session, droneToken, droneId?}` introduces a host session (its native id)
 *   as the drone whose session token it holds, and has presence tie that drone session to this
 *   machine → `{ok, droneId, cubeId, bound}`.
 * - `take {harness, session, droneToken?}` → `{ok, items: DoorItem[]}`: the notices waiting for
 *   the session's drone, reserved for this connection (a token lets an unknown session introduce
 *   itself on the way).
 * - `handed {ids}` on the same connection: the hook has put those items in front of the model;
 *   the daemon records them (never offered again) and confirms them to presence. Items reserved
 *   and not handed go back to waiting when the connection closes.
 * - `bye {harness, session, droneToken?}` forgets the session and unties its drone session from
 *   the machine; `status` → `{ok, linked, machineId, pending, …}`.
 */
export type DoorRequest =
  | { op: "hello"; harness: string; session: string; droneToken: string; droneId?: string }
  | { op: "take"; harness: string; session: string; droneToken?: string; droneId?: string }
  | { op: "handed"; ids: string[] }
  | { op: "bye"; harness: string; session: string; droneToken?: string }
  | { op: "status" };

/** One notice as the door hands it to a hook. */
export interface DoorItem {
  readonly id: string;
  readonly cubeId: string;
  readonly entryId: string;
  /** The compact line for the model, e.g. `[DIRECT] worker-1: rebase onto main`. */
  readonly text: string;
}

/** The daemon's state as `status` reports it. */
export interface DoorStatus {
  readonly ok: true;
  readonly linked: boolean;
  readonly machineId: string;
  /** Notices waiting in the spool for a session. */
  readonly pending: number;
  /** Notices handed into a session (remembered for dedup and confirmation). */
  readonly handed: number;
  readonly sessions: number;
  readonly links: number;
}

/** A connection to the door that sends requests one after another and reads their answers. */
export class DoorClient {
  #buffer = "";
  #waiting: ((line: string) => void)[] = [];
  #failed: Error | null = null;
  #failWaiters: ((error: Error) => void)[] = [];

  private constructor(private readonly socket: ReturnType<typeof connect>) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.#buffer += chunk;
      let newline = this.#buffer.indexOf("\n");
      while (newline >= 0) {
        const line = this.#buffer.slice(0, newline);
        this.#buffer = this.#buffer.slice(newline + 1);
        this.#failWaiters.shift();
        this.#waiting.shift()?.(line);
        newline = this.#buffer.indexOf("\n");
      }
    });
    const fail = (error: Error) => {
      this.#failed ??= error;
      for (const reject of this.#failWaiters.splice(0)) reject(this.#failed);
      this.#waiting = [];
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("the door closed the connection")));
  }

  /** Connects to the door at `path`, failing after `timeoutMs`. */
  static connect(path: string, timeoutMs = 2_000): Promise<DoorClient> {
    return new Promise((resolve, reject) => {
      const socket = connect(path);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(Object.assign(new Error(`the door ${path} did not answer`), { code: "ETIMEDOUT" }));
      }, timeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        resolve(new DoorClient(socket));
      });
      socket.once("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  }

  /** Sends one request and resolves with its answer (a refusal is thrown). */
  request<T = Record<string, unknown>>(request: DoorRequest, timeoutMs = 2_000): Promise<T> {
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.socket.destroy();
        reject(new Error(`the door did not answer ${request.op} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#failWaiters.push((error) => {
        clearTimeout(timer);
        reject(error);
      });
      this.#waiting.push((line) => {
        clearTimeout(timer);
        try {
          const answer = JSON.parse(line) as { ok?: boolean; error?: string };
          if (answer.ok !== true) reject(new Error(answer.error ?? "the door refused the request"));
          else resolve(answer as T);
        } catch (error) {
          reject(error as Error);
        }
      });
      this.socket.write(`${JSON.stringify(request)}\n`);
    });
  }

  close(): void {
    this.socket.end();
  }
}
