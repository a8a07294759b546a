import type * as grpc from "@grpc/grpc-js";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import type { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";
import type { Ledger } from "./ledger";
import { pause, type StreamRecord } from "./streams";
import type { SeededMachine } from "./world";

/** Stock grpc-js channel settings of a client spreading over every replica of a service. */
export const ROUND_ROBIN: grpc.ChannelOptions = {
  "grpc.service_config": JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 1_000,
};

/** Call options carrying a bearer token. */
export function bearer(token: string, extra: { signal?: AbortSignal; deadline?: number } = {}) {
  return { metadata: { authorization: `Bearer ${token}` }, ...extra };
}

/** Names the fleet process at a peer address (`127.0.0.1:<port>`), for excusing broken streams. */
export type PeerName = (peer: string) => string;

/** A typed activity client over every cube replica (`ipv4:a,b`, round robin; `pickFirst`: the first that answers). */
export function activityClient(target: string, pickFirst = false): TypedClient<typeof ActivityService> {
  return createClient(ActivityService, target, undefined, pickFirst ? PICK_FIRST : ROUND_ROBIN);
}

/** grpc-js's default policy, with quick reconnects: a client that stays on the first address while it answers. */
export const PICK_FIRST: grpc.ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 1_000,
};

/**
 * Follows SubscribeActivity straight on the cube replicas, resuming with `after` = the last cursor
 * whenever the stream ends, as any internal gRPC client must. Entries only (a client credential
 * gets no notifications).
 */
export function followActivity(
  record: StreamRecord,
  client: TypedClient<typeof ActivityService>,
  token: string,
  cubeId: string,
  ledger: Ledger,
  peerName: PeerName,
  signal: AbortSignal,
): Promise<void> {
  return (async () => {
    while (!signal.aborted) {
      const startedAt = Date.now();
      record.opens += 1;
      const stream = client.subscribeActivity({ cubeId, after: record.cursor }, bearer(token, { signal }));
      let peer = "";
      try {
        for await (const message of stream) {
          if (!peer) peer = stream.getPeer();
          const { event } = message;
          if (event.case === "entry") record.deliver(event.value.id, event.value.cursor);
          else if (event.case === "ready") record.readyCount += 1;
          else if (event.case === "closed") {
            if (event.value.cursor) record.cursor = event.value.cursor;
            record.breaks.push({ at: Date.now(), reason: `closed ${event.value.reason}` });
            break;
          } else if (event.case === "goingAway") {
            // Not an error: the replica drains; resume from its cursor (elsewhere).
            if (event.value.cursor) record.cursor = event.value.cursor;
            record.goingAway += 1;
            break;
          } else if (event.case === "accessRevoked") throw new Error(`access revoked: ${event.value.reason}`);
        }
      } catch (error) {
        if (signal.aborted) return;
        record.breaks.push({ at: Date.now(), reason: String((error as Error).message) });
        peer ||= stream.getPeer();
        ledger.recordGrpc("grpc SubscribeActivity stream", peer, startedAt, error, [peerName(peer)]);
        await pause(200, signal);
      }
    }
  })();
}

/**
 * Follows WatchMachines straight on the presence replicas: snapshot first, then transitions,
 * resuming with `after` = the last cursor. A snapshot with `reset` on a resume is recorded as a break
 * (the client would have to drop its state).
 */
export function followMachines(
  record: StreamRecord,
  client: TypedClient<typeof MachineService>,
  token: string,
  ledger: Ledger,
  peerName: PeerName,
  signal: AbortSignal,
): Promise<void> {
  return (async () => {
    while (!signal.aborted) {
      const startedAt = Date.now();
      record.opens += 1;
      const stream = client.watchMachines({ after: record.cursor }, bearer(token, { signal }));
      let peer = "";
      let wentAway = false;
      try {
        for await (const message of stream) {
          if (!peer) peer = stream.getPeer();
          const { event } = message;
          if (event.case === "machineSnapshot") {
            if (record.opens > 1 || event.value.reset) {
              record.errorEvents.push({ at: Date.now(), text: `snapshot on resume (reset=${event.value.reset})` });
            }
            record.cursor = event.value.cursor;
          } else if (event.case === "machineLinked" || event.case === "machineUnlinked") {
            const kind = event.case === "machineLinked" ? "linked" : "unlinked";
            record.deliver(`${event.value.cursor}/${kind}/${event.value.machineId}`, event.value.cursor);
          } else if (event.case === "machineReady") record.readyCount += 1;
          else if (event.case === "goingAway") {
            if (event.value.cursor) record.cursor = event.value.cursor;
            record.goingAway += 1;
            wentAway = true;
            break;
          } else if (event.case === "accessRevoked") throw new Error("access revoked");
        }
        if (!wentAway) record.breaks.push({ at: Date.now(), reason: "ended" });
      } catch (error) {
        if (signal.aborted) return;
        record.breaks.push({ at: Date.now(), reason: String((error as Error).message) });
        peer ||= stream.getPeer();
        ledger.recordGrpc("grpc WatchMachines stream", peer, startedAt, error, [peerName(peer)]);
        await pause(200, signal);
      }
    }
  })();
}

/** An acknowledged append: the entry the service committed and answered with. */
export interface Acked {
  readonly id: string;
  readonly message: string;
  readonly surface: string;
  readonly at: number;
}

/** Appends broadcast entries straight to the cube replicas over gRPC (bearer token), one at a time. */
export function appendOverGrpc(
  client: TypedClient<typeof ActivityService>,
  token: string,
  cubeId: string,
  ledger: Ledger,
  acked: Acked[],
  signal: AbortSignal,
  everyMs: number,
): Promise<void> {
  return (async () => {
    for (let n = 1; !signal.aborted; n++) {
      const message = `grpc-${n}`;
      const startedAt = Date.now();
      try {
        const reply = await client.appendEntry(
          { cubeId, message, visibility: Visibility.BROADCAST },
          bearer(token, { deadline: 10_000 }),
        );
        ledger.recordGrpc("grpc AppendEntry", "cube", startedAt);
        acked.push({ id: reply.entry!.id, message, surface: "grpc", at: Date.now() });
      } catch (error) {
        ledger.recordGrpc("grpc AppendEntry", "cube", startedAt, error);
      }
      await pause(everyMs, signal);
    }
  })();
}

/** What a machine's link loop did. */
export interface LinkStats {
  /** `linked` answers received. */
  links: number;
  /** Links we ended ourselves and the server completed with OK. */
  unlinks: number;
  /** Links that broke under us (replica died). */
  broken: number;
}

/**
 * A machine daemon: links over the stock grpc-js bidi stream, holds the link a moment, ends it,
 * and links again — each cycle one `machine_linked` and one `machine_unlinked` transition.
 */
export function cycleLinks(
  client: TypedClient<typeof LinkService>,
  machine: SeededMachine,
  ledger: Ledger,
  peerName: PeerName,
  stats: LinkStats,
  signal: AbortSignal,
  holdMs: number,
): Promise<void> {
  return (async () => {
    while (!signal.aborted) {
      const startedAt = Date.now();
      const link = client.link(bearer(machine.token));
      let peer = "";
      let linked = false;
      const done = new Promise<grpc.StatusObject>((resolve) => link.call.once("status", resolve));
      // A link that gets no `linked` answer within 10 s is given up (and recorded), not waited on forever.
      const giveUp = setTimeout(() => link.cancel(), 10_000);
      try {
        link.send({ event: { case: "hello", value: { agentVersion: "fleet-test", hostname: machine.name } } });
        const iterator = link[Symbol.asyncIterator]();
        const first = await iterator.next();
        peer = link.call.getPeer();
        if (first.done || first.value.event.case !== "linked") throw new Error(`no linked answer (${first.value})`);
        clearTimeout(giveUp);
        linked = true;
        stats.links += 1;
        await pause(holdMs, signal);
        link.end();
        for (;;) if ((await iterator.next()).done) break;
        const status = await done;
        if (status.code !== 0) throw Object.assign(new Error(status.details), status);
        stats.unlinks += 1;
        ledger.recordGrpc("grpc Link", peer, startedAt);
      } catch (error) {
        clearTimeout(giveUp);
        link.cancel();
        if (linked) stats.broken += 1;
        peer ||= link.call.getPeer();
        ledger.recordGrpc("grpc Link", peer, startedAt, error, [peerName(peer)]);
      }
      await pause(100 + Math.floor(Math.random() * 100), signal);
    }
  })();
}
