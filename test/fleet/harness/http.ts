import type { Ledger } from "./ledger";

/** The network error code behind a failed fetch (`ECONNREFUSED`, `ECONNRESET`, `UND_ERR_SOCKET`…). */
function networkCode(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message ?? String(error);
}

/**
 * What a Kubernetes Service gives an HTTP client of the gateways: one client sticks to one gateway
 * until it cannot connect to it, then moves on to the next. A connection refused never reached a
 * gateway, so the request is sent again elsewhere at once; a request that was sent and then lost
 * (reset mid-flight) is not repeated — it fails, and the next request goes elsewhere.
 * Every response status (and every network failure) is written to the ledger.
 */
export class GatewayRouter {
  #index: number;
  /** How many times this client moved to another gateway. */
  switches = 0;

  constructor(
    private readonly gateways: () => readonly string[],
    private readonly ledger: Ledger,
    /** The client's name in the ledger, e.g. `sse cube #2`. */
    readonly label: string,
    preferred = 0,
  ) {
    this.#index = preferred;
  }

  /** The gateway base URL this client uses now. */
  get current(): string {
    const all = this.gateways();
    return all[this.#index % all.length]!;
  }

  #moveOn(): void {
    this.#index += 1;
    this.switches += 1;
  }

  /** Pins the client to the gateway at `index` (an MCP session opened on A and continued on B). */
  pin(index: number): void {
    this.#index = index;
  }

  /** A fetch for this client: any URL's origin is replaced by the current gateway's. */
  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const original = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
    const tries = this.gateways().length * 2;
    for (let attempt = 0; ; attempt++) {
      const base = new URL(this.current);
      const url = new URL(`${original.pathname}${original.search}`, base);
      const startedAt = Date.now();
      try {
        const response = await fetch(url, init);
        this.ledger.record({
          surface: `${this.label} ${init?.method ?? "GET"}`,
          via: base.host,
          startedAt,
          outcome: String(response.status),
          ok: response.status < 400,
          serverSide: response.status >= 500,
        });
        return response;
      } catch (error) {
        const code = networkCode(error);
        if ((init?.signal as AbortSignal | undefined)?.aborted) throw error;
        if (code === "ECONNREFUSED" && attempt < tries) {
          this.#moveOn();
          continue;
        }
        this.ledger.record({
          surface: `${this.label} ${init?.method ?? "GET"}`,
          via: base.host,
          startedAt,
          outcome: `network ${code}`,
          ok: false,
          serverSide: true,
        });
        this.#moveOn();
        throw error;
      }
    }
  };
}
