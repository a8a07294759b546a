import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Drone } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import { isUuid } from "@unimatrix/service-kit/rules";
import type { McpSession } from "../session";

// What the tools take as references — a drone by label or id, an entry by `#n` or id, a `since`
// anchor — put into the contract's fields as given: the cube service resolves them (one call).

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

/** An entry reference (`#n`, `n` or an id) as a request's `entry_id` / `entry_position`. */
export function entryFields(ref: string): { entryId: string } | { entryPosition: bigint } {
  return isPosition(ref) ? { entryPosition: positionIn(ref) } : { entryId: ref };
}

/** A `reply_to` reference as AppendEntry's `reply_to_entry_id` / `reply_to_position` (none when absent). */
export function replyFields(ref: string | undefined): { replyToEntryId?: string; replyToPosition?: bigint } {
  if (ref === undefined) return {};
  return isPosition(ref) ? { replyToPosition: positionIn(ref) } : { replyToEntryId: ref };
}

/** Recipients given as drone ids or labels, split into AppendEntry's two fields. */
export function recipientFields(given: readonly string[]) {
  return { recipientDroneIds: given.filter(isUuid), recipientLabels: given.filter((value) => !isUuid(value)) };
}

/** The root entry id of the thread an entry (`#n` or id) belongs to (ReadThread resolves the reference). */
export async function threadRoot(session: McpSession, ref: string, signal: AbortSignal): Promise<string> {
  const reply = await session.upstreams.activity.readThread(
    { cubeId: session.cubeId(), ...entryFields(ref), pageSize: 1 },
    await session.asActor(signal),
  );
  const fields = entryFields(ref);
  return reply.root?.id ?? reply.replies[0]?.threadRootEntryId ?? ("entryId" in fields ? fields.entryId : "");
}

/** The DronesSince anchor a `since` input names: an entry (#n or id) or an ISO time. */
export function sinceAnchor(session: McpSession, since: string, cubeId: string | undefined) {
  if (isPosition(since)) {
    if (cubeId !== undefined && cubeId !== session.record.seat?.cubeId) {
      throw new InvalidArgumentError("since", "a #position works only in your seat's cube; pass an entry id or time");
    }
    return { case: "sincePosition" as const, value: positionIn(since) };
  }
  if (isUuid(since)) return { case: "sinceEntryId" as const, value: since };
  const at = new Date(since);
  if (Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError("since", "must be a #position, an entry id or an ISO time");
  }
  return { case: "sinceTime" as const, value: timestampFromDate(at) };
}

/** `#41` or `41`: a position in the cube's order (the numbers the tools print). */
function isPosition(ref: string): boolean {
  return /^#?[0-9]{1,15}$/.test(ref);
}

function positionIn(ref: string): bigint {
  return BigInt(ref.replace(/^#/, ""));
}
