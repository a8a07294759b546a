import { createConnection, createServer, type Server, type Socket } from "node:net";

/** One Redis outage the proxy caused: from `from` to `to` (epoch ms). */
export interface Outage {
  readonly from: number;
  readonly to: number;
}

/**
 * A TCP proxy in front of Redis that the test can cut: `cut()` destroys every connection and stops
 * listening (new connections are refused), `heal()` listens again on the same port. Written here
 * because it is twenty lines of `net` and a library would hide exactly what the test must control.
 */
export class RedisProxy {
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  #port = 0;
  #cutAt: number | undefined;
  /** Every outage so far. */
  readonly outages: Outage[] = [];
  /** Connections accepted (clients reconnecting show up here). */
  accepted = 0;

  constructor(
    private readonly upstreamHost = "127.0.0.1",
    private readonly upstreamPort = 6379,
  ) {}

  /** The port services dial: `redis://127.0.0.1:<port>`. */
  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.#port}`;
  }

  /** Whether Redis is cut off right now. */
  get isCut(): boolean {
    return this.#cutAt !== undefined;
  }

  /** Starts listening (a fresh port the first time, the same port after a cut). */
  async listen(): Promise<void> {
    const server = createServer((client) => this.#pipe(client));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.#port, "127.0.0.1", () => resolve());
    });
    this.#server = server;
    this.#port = (server.address() as { port: number }).port;
  }

  #pipe(client: Socket): void {
    this.accepted += 1;
    const upstream = createConnection({ host: this.upstreamHost, port: this.upstreamPort });
    this.#sockets.add(client);
    this.#sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Cuts Redis off: every open connection is destroyed and new ones are refused until `heal()`. */
  async cut(): Promise<void> {
    if (this.#cutAt !== undefined) return;
    this.#cutAt = Date.now();
    const server = this.#server;
    this.#server = undefined;
    const closed = new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    for (const socket of [...this.#sockets]) socket.destroy();
    this.#sockets.clear();
    await closed;
  }

  /** Lets Redis be reached again, on the same port. */
  async heal(): Promise<void> {
    if (this.#cutAt === undefined) return;
    await this.listen();
    this.outages.push({ from: this.#cutAt, to: Date.now() });
    this.#cutAt = undefined;
  }

  /** Seconds Redis was unreachable in total. */
  get outageSeconds(): number {
    return this.outages.reduce((sum, o) => sum + (o.to - o.from), 0) / 1000;
  }

  async close(): Promise<void> {
    for (const socket of [...this.#sockets]) socket.destroy();
    this.#sockets.clear();
    const server = this.#server;
    this.#server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
