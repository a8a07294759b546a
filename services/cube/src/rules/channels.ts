/** Bus message: new activity was committed up to this position. */
export const ACTIVITY = "activity";
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
