/** Bus message: new activity was committed (`activity:<position>`: up to that position). */
export const ACTIVITY = "activity";

/** The ACTIVITY message of a commit whose last item is at `position`. */
export function activityThrough(position: bigint): string {
  return `${ACTIVITY}:${position}`;
}

/** The last position an ACTIVITY message names; undefined when it names none (or is not ACTIVITY). */
export function positionOfActivity(message: string): bigint | undefined {
  if (!message.startsWith(`${ACTIVITY}:`)) return undefined;
  const text = message.slice(ACTIVITY.length + 1);
  return /^[0-9]{1,19}$/.test(text) ? BigInt(text) : undefined;
}
/** Bus message prefix: access changed (revocation, eviction, grant); open streams re-check now. */
const ACCESS = "access";

/** The ACCESS message naming whose access changed (client and drone ids). */
export function accessOf(subjectIds: readonly string[]): string {
  return `${ACCESS}:${subjectIds.join(",")}`;
}

/** Whose access an ACCESS message says changed; empty: anyone's (the bare message, or a bus reconnect). Undefined: not ACCESS. */
export function subjectsOfAccess(message: string): string[] | undefined {
  if (message === ACCESS) return [];
  if (!message.startsWith(`${ACCESS}:`)) return undefined;
  return message
    .slice(ACCESS.length + 1)
    .split(",")
    .filter((id) => id.length > 0);
}

/** The bus channel of a cube: its doorbell, rung after a commit with ACTIVITY or ACCESS. */
export function cubeChannel(cubeId: string): string {
  return `cube:${cubeId}`;
}

/** A machine's notice doorbell (`notices:<machine id>`): rung after a commit that queued notices for it. */
export function noticeChannel(machineId: string): string {
  return `notices:${machineId}`;
}
