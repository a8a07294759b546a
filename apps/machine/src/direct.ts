import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

// node:crypto, node:http and node:https are required only when a hook goes to the gateway: a hook
// at a door never pays for loading them (a plain require: an import() would start the ESM loader).

/** What one read of the drone's inbox at the gateway gave: its lines, and whether one is urgent. */
export interface InboxRead {
  readonly lines: string[];
  /** A direct message to the drone or a reply to it waits (a Stop may block once for it). */
  readonly urgent: boolean;
  /** Records that the lines are in front of the model: the next read confirms them (delivered). */
  commit(): void;
}

/** Where the hook keeps, per host session, the cursor of what it last showed (`0600`, directory `0700`). */
export function inboxStateFile(stateDir: string, harness: string, session: string): string {
  const { createHash } = require("node:crypto") as typeof import("node:crypto");
  const digest = createHash("sha256").update(`${harness}\0${session}`).digest("hex").slice(0, 32);
  return join(stateDir, `${digest}.cursor`);
}

/** Writes `text` to `path` atomically (a temporary file renamed over it), owner-only. */
function writeAtomic(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, text, { mode: 0o600 });
  renameSync(temporary, path);
}

function readState(path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return "";
  }
}

/** Forgets a session's cursor (its host session ended). */
export function forgetInboxState(path: string): void {
  rmSync(path, { force: true });
}

/**
 * Without a daemon: one `GET <gateway>/v1/inbox` with the drone token. `If-None-Match` carries the
 * cursor of the last lines this session showed, which the gateway (cube) confirms — delivered —
 * before looking for new ones; `304`/`204` is nothing new. The new cursor is written only by
 * `commit`, after the hook printed the lines, so a hook that dies first shows them again.
 */
export function readInbox(gateway: string, token: string, stateFile: string, timeoutMs = 5_000): Promise<InboxRead> {
  const shown = readState(stateFile);
  const url = new URL("/v1/inbox", gateway);
  const send =
    url.protocol === "https:"
      ? (require("node:https") as typeof import("node:https")).request
      : (require("node:http") as typeof import("node:http")).request;
  return new Promise<InboxRead>((resolve, reject) => {
    const call = send(
      url,
      {
        method: "GET",
        headers: { authorization: `Bearer ${token}`, ...(shown ? { "if-none-match": `"${shown}"` } : {}) },
        timeout: timeoutMs,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => {
          const status = response.statusCode ?? 0;
          const etag = (response.headers.etag ?? "").replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
          const commit = () => {
            if (etag && etag !== shown) writeAtomic(stateFile, etag);
          };
          if (status === 304 || status === 204) {
            // Nothing to show; the cursor may still have moved past items not shown (the drone's own).
            commit();
            resolve({ lines: [], urgent: false, commit: () => {} });
            return;
          }
          const text = Buffer.concat(chunks).toString("utf8");
          if (status !== 200) {
            reject(new Error(`the gateway answered ${status}: ${text.slice(0, 300)}`));
            return;
          }
          try {
            const body = JSON.parse(text) as { lines?: unknown; urgent?: unknown };
            const lines = Array.isArray(body.lines) ? body.lines.filter((l): l is string => typeof l === "string") : [];
            resolve({ lines, urgent: body.urgent === true, commit });
          } catch (error) {
            reject(error as Error);
          }
        });
        response.on("error", reject);
      },
    );
    call.on("timeout", () => call.destroy(new Error(`the gateway did not answer within ${timeoutMs} ms`)));
    call.on("error", reject);
    call.end();
  });
}
