import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { status } from "@grpc/grpc-js";
import type { Drone, Entry } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { InvalidArgumentError, NotFoundError } from "@unimatrix/service-kit/errors";
import { toStatus } from "@unimatrix/service-kit/grpc";
import { cursorBefore, positionOf } from "../format";
import type { McpSession } from "../session";

// What the tools take as references (a drone by label, an entry by `#n`, a `since` anchor), resolved in this one place.

/** The drones of a cube (the seat's when `cubeId` is undefined). */
export async function listDrones(
  session: McpSession,
  cubeId: string | undefined,
  signal: AbortSignal,
): Promise<Drone[]> {
  const reply = await session.upstreams.cube.listDrones(
    { cubeId: session.cubeFor(cubeId), pageSize: 500 },
    await session.asFor(cubeId, signal),
  );
  return reply.drones;
}

/** The entry id a reference names: an id as is; `#n` (or `n`) looked up as the entry at that position. */
export async function resolveEntry(
  session: McpSession,
  ref: string,
  field: string,
  signal: AbortSignal,
): Promise<string> {
  if (ref.includes("-")) return ref;
  return (await entryAt(session, ref, field, signal)).id;
}

/** The entry at position `#n`, as the drone sees it (NOT_FOUND naming `field` when it sees none there). */
async function entryAt(session: McpSession, ref: string, field: string, signal: AbortSignal): Promise<Entry> {
  const n = Number(ref.replace(/^#/, ""));
  const cubeId = session.cubeId();
  const page = await session.upstreams.activity
    .readActivity({ cubeId, cursor: cursorBefore(cubeId, n), pageSize: 1 }, await session.asActor(signal))
    .catch((error: unknown) => {
      // A position past the head (or pruned away) is an entry that is not there, said about the input.
      const code = toStatus(error).code;
      if (code === status.INVALID_ARGUMENT || code === status.FAILED_PRECONDITION) return undefined;
      throw error;
    });
  const item = page?.items[0]?.item;
  if (item?.case === "entry" && positionOf(item.value.cursor) === n) return item.value;
  throw new NotFoundError(`${field}: no entry #${n} visible to you`);
}

/** Drone ids for recipients given as ids or labels (labels resolved against the cube's drones). */
export async function resolveRecipients(session: McpSession, given: readonly string[], signal: AbortSignal) {
  const isId = (value: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(value);
  if (given.every(isId)) return [...given];
  const byLabel = new Map((await listDrones(session, undefined, signal)).map((d) => [d.label, d.id]));
  return given.map((value) => {
    if (isId(value)) return value;
    const id = byLabel.get(value);
    if (!id) throw new InvalidArgumentError("recipients", `no live drone labelled ${value} (drones_list shows them)`);
    return id;
  });
}

/** The root entry id of the thread an entry (`#n` or id) belongs to. */
export async function threadRoot(session: McpSession, ref: string, signal: AbortSignal): Promise<string> {
  if (!ref.includes("-")) {
    const entry = await entryAt(session, ref, "thread", signal);
    return entry.threadRootEntryId || entry.id;
  }
  const entryId = ref;
  const reply = await session.upstreams.activity.readThread(
    { cubeId: session.cubeId(), entryId, pageSize: 1 },
    await session.asActor(signal),
  );
  return reply.root?.id ?? entryId;
}

/** The DronesSince anchor a `since` input names: an entry (#n or id) or an ISO time. */
export async function sinceAnchor(session: McpSession, since: string, cubeId: string | undefined, signal: AbortSignal) {
  if (/^#?[0-9]{1,15}$/.test(since) || /^[0-9a-f]{8}-[0-9a-f-]{27}$/.test(since)) {
    if (cubeId !== undefined && cubeId !== session.record.seat?.cubeId && !since.includes("-")) {
      throw new InvalidArgumentError("since", "a #position works only in your seat's cube; pass an entry id or time");
    }
    const id = await resolveEntry(session, since, "since", signal);
    return { case: "sinceEntryId" as const, value: id };
  }
  const at = new Date(since);
  if (Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError("since", "must be a #position, an entry id or an ISO time");
  }
  return { case: "sinceTime" as const, value: timestampFromDate(at) };
}
