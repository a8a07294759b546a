import type { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import type { TypedClient } from "@unimatrix/service-kit/grpc";
import { bearer } from "./grpc";
import type { LogEntry } from "./truth";

/**
 * The truth of a run whose log is pruned while it runs: the cube's log read from Postgres
 * (ReadActivity, page by page, as `readLog` does) all along, every `everyMs`, so every entry is read
 * before retention can take it. A read that fails is kept (a cursor that fell below the floor
 * answers FAILED_PRECONDITION: the tap was too slow, and the run proves nothing) and retried.
 */
export class LogTap {
  readonly entries: LogEntry[] = [];
  readonly failures: string[] = [];
  #cursor: string;
  readonly #stop = new AbortController();
  readonly #loop: Promise<void>;

  constructor(
    private readonly client: TypedClient<typeof ActivityService>,
    private readonly token: string,
    private readonly cubeId: string,
    after: string,
    everyMs = 100,
  ) {
    this.#cursor = after;
    this.#loop = (async () => {
      while (!this.#stop.signal.aborted) {
        await this.#drain().catch((error: unknown) => this.failures.push(String((error as Error).message)));
        await new Promise((resolve) => setTimeout(resolve, everyMs));
      }
    })();
  }

  /** Reads until the log's end as it is now. */
  async #drain(): Promise<void> {
    for (;;) {
      const page = await this.client.readActivity(
        { cubeId: this.cubeId, cursor: this.#cursor, pageSize: 500 },
        bearer(this.token, { deadline: 10_000 }),
      );
      for (const item of page.items) {
        if (item.item.case !== "entry") continue;
        const entry = item.item.value;
        this.entries.push({
          id: entry.id,
          message: entry.message,
          cursor: entry.cursor,
          authorDroneId: entry.author?.droneId ?? "",
        });
      }
      if (page.nextCursor) this.#cursor = page.nextCursor;
      if (!page.hasMore) return;
    }
  }

  /** Stops tapping after one last read to the end: the whole log of the run, in order. */
  async finish(): Promise<LogEntry[]> {
    this.#stop.abort();
    await this.#loop;
    await this.#drain();
    return this.entries;
  }
}
