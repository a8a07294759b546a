import { EventSource } from "eventsource";
import type { Acked } from "./grpc";
import type { GatewayRouter } from "./http";
import type { Ledger } from "./ledger";
import { pause, type StreamRecord } from "./streams";

/** Names the fleet process behind a gateway base URL. */
export type GatewayName = (url: string) => string;

/**
 * An SSE stream read with the `eventsource` package — EventSource semantics exactly: it reconnects
 * after a dropped connection with `Last-Event-ID`, and gives up for good on a non-200 answer.
 * Its fetch goes through the client's gateway router (a killed gateway's clients move to the
 * other). The first request carries `Last-Event-ID` = the record's start cursor, as the console's
 * fetch-based reader does after paging the log.
 */
export function followSse(
  record: StreamRecord,
  router: GatewayRouter,
  path: string,
  token: string,
  ledger: Ledger,
  gatewayName: GatewayName,
): { close(): void; gaveUp(): boolean } {
  let openedAt = Date.now();
  let gaveUp = false;
  const source = new EventSource(`${router.current}${path}`, {
    fetch: (url, init) => {
      const headers: Record<string, string> = { ...init.headers, authorization: `Bearer ${token}` };
      if (!headers["Last-Event-ID"] && record.cursor) headers["Last-Event-ID"] = record.cursor;
      record.opens += 1;
      openedAt = Date.now();
      return router.fetch(url, { ...init, headers });
    },
  });
  const data = (event: MessageEvent) => JSON.parse(event.data as string) as Record<string, unknown>;
  if (record.topic === "activity") {
    source.addEventListener("entry", (event) => record.deliver(data(event).id as string, event.lastEventId));
    source.addEventListener("ready", () => {
      record.readyCount += 1;
    });
    source.addEventListener("closed", (event) => {
      record.breaks.push({ at: Date.now(), reason: `closed ${event.data}` });
    });
  } else {
    source.addEventListener("machine_snapshot", (event) => {
      const snapshot = data(event);
      if (record.opens > 1 || snapshot.reset) {
        record.errorEvents.push({ at: Date.now(), text: `snapshot on resume (reset=${snapshot.reset})` });
      }
      record.cursor = event.lastEventId;
    });
    for (const kind of ["linked", "unlinked"] as const) {
      source.addEventListener(`machine_${kind}`, (event) => {
        const transition = data(event);
        record.deliver(`${event.lastEventId}/${kind}/${transition.machineId}`, event.lastEventId);
      });
    }
    source.addEventListener("machine_ready", () => {
      record.readyCount += 1;
    });
  }
  source.addEventListener("access_revoked", () => {
    record.errorEvents.push({ at: Date.now(), text: "access_revoked" });
    source.close();
  });
  source.addEventListener("error", (event) => {
    const message = event as unknown as { data?: string; message?: string; code?: number };
    if (typeof message.data === "string") {
      // The gateway's own `event: error` frame: it gave up on its upstream mid-stream.
      record.errorEvents.push({ at: Date.now(), text: `error event ${message.data}` });
      return;
    }
    record.breaks.push({ at: Date.now(), reason: message.message ?? "disconnected" });
    ledger.record({
      surface: `${record.surface} stream`,
      via: gatewayName(router.current),
      startedAt: openedAt,
      outcome: `disconnected: ${message.message ?? ""}`,
      ok: false,
      serverSide: true,
      excusedBy: [gatewayName(router.current)],
    });
    if (source.readyState === source.CLOSED) {
      gaveUp = true;
      record.errorEvents.push({ at: Date.now(), text: `EventSource gave up: ${message.message ?? message.code}` });
    }
  });
  return { close: () => source.close(), gaveUp: () => gaveUp };
}

/** Appends broadcast entries with Connect JSON through the client's gateway, one at a time. */
export function appendOverConnect(
  router: GatewayRouter,
  token: string,
  cubeId: string,
  acked: Acked[],
  signal: AbortSignal,
  everyMs: number,
  /** Each message is `<prefix>-<n>`: unique in the fleet's load (an MCP push is keyed by its message). */
  prefix = "connect",
): Promise<void> {
  return (async () => {
    for (let n = 1; !signal.aborted; n++) {
      const message = `${prefix}-${n}`;
      try {
        const response = await router.fetch(`${router.current}/unimatrix.cube.v1.ActivityService/AppendEntry`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
          body: JSON.stringify({ cubeId, message, visibility: "VISIBILITY_BROADCAST" }),
          signal: AbortSignal.timeout(15_000),
        });
        const body = (await response.json()) as { entry?: { id: string } };
        if (response.status === 200 && body.entry) {
          acked.push({ id: body.entry.id, message, surface: "connect", at: Date.now() });
        }
      } catch {
        // Written to the ledger by the router (a reset mid-flight); the next append goes elsewhere.
      }
      await pause(everyMs, signal);
    }
  })();
}
