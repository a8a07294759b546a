import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createConnection, createServer } from "node:net";

/** A free TCP port on 127.0.0.1 (the OS picks it; a race with another process is possible, not likely). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.listen(0, "127.0.0.1", resolve).once("error", reject));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Why this machine cannot run a Redis server of a test's own (no `redis-server` on PATH), or undefined. */
export function redisServerUnavailable(): string | undefined {
  try {
    execFileSync("redis-server", ["--version"], { stdio: "ignore" });
    return undefined;
  } catch (error) {
    return `redis-server is not runnable: ${(error as Error).message}`;
  }
}

/** Answers once something accepts TCP connections on the port and answers PING with PONG. */
async function pong(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let text = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      text += chunk.toString();
      if (text.includes("\r\n")) done(text.startsWith("+PONG"));
    });
  });
}

/** The items of a RESP array of bulk strings and integers (`*2\r\n$1\r\na\r\n:3\r\n`). */
function parseArray(reply: string): string[] {
  const lines = reply.split("\r\n");
  const items: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith("$")) items.push(lines[++i]!);
    else if (line.startsWith(":")) items.push(line.slice(1));
  }
  return items;
}

/**
 * A Redis server of a test's own, with no persistence (`--save "" --appendonly no`: a restart
 * comes back empty, as a Redis used as a doorbell does in production), on a port of its own so
 * that the shared Redis on 6379 is never touched. `kill()` is a SIGKILL; `start()` again runs a
 * fresh, empty server on the same port.
 */
export class PrivateRedis {
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  /** Times the server was started. */
  starts = 0;

  private constructor(readonly port: number) {}

  /** Starts a server on a free port and waits until it answers PING. */
  static async create(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort());
    await redis.start();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  /** Starts a fresh (empty) server on the port and waits until it answers PING. */
  async start(timeoutMs = 10_000): Promise<void> {
    if (this.#child) throw new Error("the private redis-server is already running");
    const child = spawn(
      "redis-server",
      ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"],
      { stdio: "ignore" },
    );
    this.#child = child;
    this.starts += 1;
    this.#exited = new Promise((resolve) =>
      child.once("exit", () => {
        if (this.#child === child) this.#child = undefined;
        resolve();
      }),
    );
    const until = Date.now() + timeoutMs;
    while (!(await pong(this.port))) {
      if (!this.#child) throw new Error(`redis-server on port ${this.port} exited at start`);
      if (Date.now() > until)
        throw new Error(`redis-server on port ${this.port} did not answer within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /**
   * The channels subscribed on the server now, with how many subscribers each (`PUBSUB CHANNELS`
   * then `PUBSUB NUMSUB`, spoken in RESP over a socket of its own).
   */
  async subscriptions(pattern = "*"): Promise<Map<string, number>> {
    const channels = parseArray(await this.#command("PUBSUB", "CHANNELS", pattern));
    if (channels.length === 0) return new Map();
    const counts = parseArray(await this.#command("PUBSUB", "NUMSUB", ...channels));
    const out = new Map<string, number>();
    for (let i = 0; i + 1 < counts.length; i += 2) out.set(counts[i]!, Number(counts[i + 1]));
    return out;
  }

  /** Sends one command and resolves with the whole raw reply (read until the socket is quiet for 50 ms). */
  #command(...args: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ host: "127.0.0.1", port: this.port });
      let text = "";
      let quiet: NodeJS.Timeout | undefined;
      socket.once("error", reject);
      socket.once("connect", () =>
        socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("")}`),
      );
      socket.on("data", (chunk) => {
        text += chunk.toString();
        clearTimeout(quiet);
        quiet = setTimeout(() => {
          socket.destroy();
          resolve(text);
        }, 50);
      });
    });
  }

  /** SIGKILLs the server (everything in it is lost) and waits until it is gone. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    child.kill("SIGKILL");
    await this.#exited;
  }

  /** Stops the server for good (SIGKILL: it keeps nothing anyway). */
  async stop(): Promise<void> {
    await this.kill();
  }
}
