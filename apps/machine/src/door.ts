import { chmodSync, lstatSync, mkdirSync, rmSync, statSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { dirname } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { type DoorHandler, hookHttp } from "./door-http";

export type { DoorHandler } from "./door-http";

/** The door is held by a live daemon: a second one is refused, the socket left alone. */
export class DoorInUseError extends Error {
  readonly code = "EADDRINUSE";
  constructor(readonly path: string) {
    super(`EADDRINUSE: a unimatrix machine daemon is already serving ${path}; stop it first (or pass another --door)`);
  }
}

/** What probing a door found: a listener answered, or the connection was refused (nobody listens). */
export type ProbeResult = "live" | "refused";

/**
 * Connects to the socket at `path`: `live` when it connects, `refused` on ECONNREFUSED or
 * ENOENT. Any other failure (EACCES, a timeout, …) is thrown: it proves nothing about the door.
 */
export function probeDoor(path: string, timeoutMs = 1_000): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    const finish = (error: Error | null, result?: ProbeResult) => {
      socket.destroy();
      if (error) reject(error);
      else resolve(result as ProbeResult);
    };
    socket.setTimeout(timeoutMs, () =>
      finish(Object.assign(new Error(`the door ${path} did not answer within ${timeoutMs} ms`), { code: "ETIMEDOUT" })),
    );
    socket.once("connect", () => finish(null, "live"));
    socket.once("error", (error: NodeJS.ErrnoException) =>
      error.code === "ECONNREFUSED" || error.code === "ENOENT" ? finish(null, "refused") : finish(error),
    );
  });
}

/**
 * Clears a stale door before listening. Only a refused connection proves it stale; a live
 * listener is `DoorInUseError`; a timeout or a permission failure is thrown and deletes nothing;
 * and the file is removed only if its inode is still the one probed (another daemon may have
 * replaced it meanwhile).
 */
export async function clearStaleDoor(path: string, probe: (path: string) => Promise<ProbeResult> = probeDoor) {
  let inode: number;
  try {
    inode = statSync(path).ino;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  if ((await probe(path)) === "live") throw new DoorInUseError(path);
  try {
    if (statSync(path).ino === inode) rmSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

/**
 * Makes the door's directory owner-only (0700), creating it when missing. A directory that exists
 * and is not ours, or is not a directory, is refused rather than changed.
 */
function prepareDoorDirectory(path: string): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory()) throw new Error(`the door's directory ${dir} is not a directory`);
  if (typeof process.getuid === "function" && stat.uid !== process.getuid())
    throw new Error(`the door's directory ${dir} belongs to another user`);
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

/**
 * Opens the door: an owner-only (0600) Unix socket in an owner-only directory, after the stale
 * rules above. Each connection sends newline-delimited JSON requests and gets one JSON line back
 * per request, in order — or, when its first byte is not `{`, speaks HTTP/1.1 to the door's hook
 * endpoint (`door-http.ts`, for the `unimatrix-hook` sh client): one socket, one permission check.
 */
export async function openDoor(
  path: string,
  handle: DoorHandler,
  options: { probe?: (path: string) => Promise<ProbeResult>; onClose?: (connection: Socket) => void } = {},
): Promise<Server> {
  prepareDoorDirectory(path);
  await clearStaleDoor(path, options.probe);
  const http = hookHttp(handle);
  const server = createServer((socket) => {
    socket.on("error", () => {});
    socket.on("close", () => options.onClose?.(socket));
    socket.once("data", (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      if (first[0] === 0x7b) serveConnection(socket, handle);
      else http.emit("connection", socket);
      socket.resume();
    });
  });
  server.once("close", () => http.close());
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(error.code === "EADDRINUSE" ? new DoorInUseError(path) : error),
    );
    server.listen(path, () => resolve());
  });
  chmodSync(path, 0o600);
  return server;
}

/** Requests larger than this close the connection (a hook's request is a few hundred bytes). */
const MAX_LINE = 64 * 1024;

function serveConnection(socket: Socket, handle: DoorHandler): void {
  let buffer = "";
  let work = Promise.resolve();
  const decoder = new StringDecoder("utf8");
  socket.on("data", (chunk: Buffer) => {
    buffer += decoder.write(chunk);
    if (buffer.length > MAX_LINE && !buffer.includes("\n")) {
      socket.destroy();
      return;
    }
    let newline = buffer.indexOf("\n");
    while (newline >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      newline = buffer.indexOf("\n");
      work = work.then(async () => {
        let answer: unknown;
        try {
          const request = JSON.parse(line) as unknown;
          if (typeof request !== "object" || request === null || Array.isArray(request))
            throw new Error("a request is a JSON object");
          answer = await handle(request as Record<string, unknown>, socket);
        } catch (error) {
          answer = { ok: false, error: (error as Error).message };
        }
        if (!socket.destroyed) socket.write(`${JSON.stringify(answer)}\n`);
      });
    }
  });
}
