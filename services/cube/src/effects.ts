import { type Bus, publishAfterCommit } from "@unimatrix/service-kit/bus";
import type { Logger } from "pino";
import { ACTIVITY, accessOf, activityThrough, cubeChannel, noticeChannel } from "./rules/channels";
import { type AuthCache, invalidateAuth } from "./store/auth-cache";

/**
 * What a committed write asks the world to learn, published after the commit by `publishEffects`
 * (never inside a transaction). Every field is optional; an empty object publishes nothing.
 */
export interface Effects {
  /** Auth-cache tags to drop on every replica (revocations, evictions, role or grant changes). */
  readonly authTags?: readonly string[];
  /** Cubes whose open streams re-check access, with whose access changed. */
  readonly access?: { readonly cubeIds: readonly string[]; readonly subjectIds: readonly string[] };
  /** Cubes with new committed activity: their doorbells ring ACTIVITY. */
  readonly activity?: readonly string[];
  /**
   * Where a cube's new activity ends, when the write knows (an append): its doorbell names the
   * position, and a replica whose feed already has it (its own streams got it) skips the read.
   */
  readonly through?: { readonly cubeId: string; readonly position: bigint };
  /** Machines with newly queued notices: their notice doorbells ring. */
  readonly noticeMachines?: readonly string[];
}

/** A write path's answer: what it did, and what to publish once it committed. */
export interface OpResult<T> {
  readonly result: T;
  readonly effects: Effects;
}

/** What publishing needs of the service's dependencies. */
export type EffectDeps = { readonly bus: Bus; readonly logger: Logger; readonly auth: AuthCache };

/**
 * THE place effects are published, after the commit: auth invalidations first (so a re-check reads
 * fresh), then ACCESS and ACTIVITY doorbells, then machines' notice doorbells. Never throws (the
 * kit's post-commit publish logs failures; a missed doorbell is healed by the readers' polls).
 */
export async function publishEffects(deps: EffectDeps, effects: Effects): Promise<void> {
  if (effects.authTags && effects.authTags.length > 0) await invalidateAuth(deps, effects.authTags);
  if (effects.access && effects.access.cubeIds.length > 0) {
    const channels = [...new Set(effects.access.cubeIds)].map(cubeChannel);
    await publishAfterCommit(deps.bus, channels, accessOf(effects.access.subjectIds), deps.logger);
  }
  if (effects.activity && effects.activity.length > 0) {
    const through = effects.through;
    const bare = [...new Set(effects.activity)].filter((cubeId) => cubeId !== through?.cubeId);
    if (bare.length > 0) await publishAfterCommit(deps.bus, bare.map(cubeChannel), ACTIVITY, deps.logger);
    if (through && effects.activity.includes(through.cubeId)) {
      const message = activityThrough(through.position);
      await publishAfterCommit(deps.bus, [cubeChannel(through.cubeId)], message, deps.logger);
    }
  }
  if (effects.noticeMachines && effects.noticeMachines.length > 0) {
    const channels = [...new Set(effects.noticeMachines)].map(noticeChannel);
    await publishAfterCommit(deps.bus, channels, "notice", deps.logger);
  }
}

/**
 * Runs a write path, then publishes its effects; resolves with its result. `committed` sees the
 * result after the commit and before anything is published (this replica's own streams first).
 */
export async function runOp<T>(
  deps: EffectDeps,
  op: Promise<OpResult<T>>,
  committed?: (result: T) => void,
): Promise<T> {
  const { result, effects } = await op;
  committed?.(result);
  await publishEffects(deps, effects);
  return result;
}
