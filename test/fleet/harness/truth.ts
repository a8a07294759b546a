import type { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import type { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import type { TypedClient } from "@unimatrix/service-kit/grpc";
import { bearer } from "./grpc";

/** One entry of the cube's log, as the truth keeps it. */
export interface LogEntry {
  readonly id: string;
  readonly message: string;
  readonly cursor: string;
  readonly authorDroneId: string;
}

/** The cube's log after `after`, read page by page from Postgres through ReadActivity: the truth. */
export async function readLog(
  client: TypedClient<typeof ActivityService>,
  token: string,
  cubeId: string,
  after: string,
): Promise<LogEntry[]> {
  const entries: LogEntry[] = [];
  let cursor = after;
  for (;;) {
    const page = await client.readActivity({ cubeId, cursor, pageSize: 500 }, bearer(token, { deadline: 10_000 }));
    for (const item of page.items) {
      if (item.item.case === "entry") {
        const entry = item.item.value;
        entries.push({
          id: entry.id,
          message: entry.message,
          cursor: entry.cursor,
          authorDroneId: entry.author?.droneId ?? "",
        });
      }
    }
    if (!page.hasMore || page.nextCursor === cursor) return entries;
    cursor = page.nextCursor;
  }
}

/** The tenant's presence transitions after `after`, replayed by a fresh WatchMachines up to `machine_ready`. */
export async function replayTransitions(
  client: TypedClient<typeof MachineService>,
  token: string,
  after: string,
): Promise<string[]> {
  const controller = new AbortController();
  const keys: string[] = [];
  const stream = client.watchMachines({ after }, bearer(token, { signal: controller.signal, deadline: 30_000 }));
  try {
    for await (const message of stream) {
      const { event } = message;
      if (event.case === "machineSnapshot")
        throw new Error(`replay from ${after} got a snapshot (reset=${event.value.reset})`);
      if (event.case === "machineLinked") keys.push(`${event.value.cursor}/linked/${event.value.machineId}`);
      if (event.case === "machineUnlinked") keys.push(`${event.value.cursor}/unlinked/${event.value.machineId}`);
      if (event.case === "machineReady") return keys;
    }
  } finally {
    controller.abort();
  }
  throw new Error("replay ended before machine_ready");
}

/** Per machine, whether its transitions alternate linked/unlinked starting with linked; lists the ones that do not. */
export function nonAlternating(keys: readonly string[]): string[] {
  const last = new Map<string, string>();
  const bad: string[] = [];
  for (const key of keys) {
    const [, kind, machine] = key.split("/") as [string, string, string];
    const before = last.get(machine) ?? "unlinked";
    if (before === kind) bad.push(key);
    last.set(machine, kind);
  }
  return bad;
}

/** Linked transitions per machine id. */
export function linkedCounts(keys: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const key of keys) {
    const [, kind, machine] = key.split("/") as [string, string, string];
    if (kind === "linked") counts.set(machine, (counts.get(machine) ?? 0) + 1);
  }
  return counts;
}
