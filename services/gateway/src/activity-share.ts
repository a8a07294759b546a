import { create } from "@bufbuild/protobuf";
import type { Metadata } from "@grpc/grpc-js";
import {
  StreamCloseReason,
  type SubscribeActivityResponse,
  SubscribeActivityResponseSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import type { EdgeAuthenticator } from "./auth";
import type { Step } from "./follow";
import { upstreamMetadata } from "./forward";
import type { SharedKind, SharedMember } from "./shared-member";
import type { Upstreams } from "./upstreams";

// What SSE streams and MCP pushes need to share activity upstreams (`SharedUpstreams`).

/** What an activity event means for following the stream. */
const activityStep = ({ event }: SubscribeActivityResponse): Step => {
  switch (event.case) {
    case "entry":
    case "notification":
    // Retention passed the cursor: resume after the floor it names (the consumer rebuilds its view).
    case "reset":
      return { cursor: event.value.cursor };
    case "ready":
    case "heartbeat":
      return { start: event.value.cursor };
    case "accessRevoked":
      return { final: true };
    case "goingAway":
      // The replica drained: resume elsewhere after its cursor (the browser never sees it).
      return { goingAway: true, ...(event.value.cursor ? { cursor: event.value.cursor } : {}) };
    case "closed":
      // An older replica shutting down says "resume elsewhere"; any other close is the answer.
      return event.value.reason === StreamCloseReason.SHUTDOWN
        ? { goingAway: true, ...(event.value.cursor ? { cursor: event.value.cursor } : {}) }
        : { final: true };
    default:
      // An event this gateway does not know yet: if the stream ends after it, it is re-opened.
      return {};
  }
};

/** Activity streams share an upstream per (cube, viewer class): see `SharedUpstreams`. */
export const activityShare: SharedKind<SubscribeActivityResponse> = {
  step: activityStep,
  isReady: (message) => message.event.case === "ready",
  readyAt: (cursor) => create(SubscribeActivityResponseSchema, { event: { case: "ready", value: { cursor } } }),
  tooSlowAt: (cursor) =>
    create(SubscribeActivityResponseSchema, {
      event: {
        case: "closed",
        value: { reason: StreamCloseReason.SLOW_CONSUMER, ...(cursor !== undefined ? { cursor } : {}) },
      },
    }),
  revokedFor: (reason) =>
    create(SubscribeActivityResponseSchema, { event: { case: "accessRevoked", value: { reason } } }),
  accessNews: ({ event }) => (event.case === "accessChanged" ? event.value.subjectIds : undefined),
  isRevoked: (message) => message.event.case === "accessRevoked",
};

/** What a shared activity upstream reads (the first half of its sharing key). */
export const activityWhat = (cubeId: string) => `activity:${cubeId}`;

/** Opens SubscribeActivity on a cube after a cursor, asking for access news (a shared upstream checks its other readers on it). */
export const openActivity =
  (upstreams: Upstreams, cubeId: string) =>
  (after: string | undefined, options: { metadata: Metadata; signal: AbortSignal }) =>
    upstreams.activity.subscribeActivity(
      { cubeId, accessChanges: true, ...(after !== undefined ? { after } : {}) },
      options,
    );

/** Whether the principal of `metadata` may read a cube: GetCube answers, or refuses with why not. */
export const mayReadCube = (upstreams: Upstreams, cubeId: string) => (metadata: Metadata) =>
  upstreams.cube.getCube({ cubeId }, { metadata, deadline: 5_000 });

/**
 * A member of a shared upstream for an edge caller (its `Authorization`): it opens the upstream
 * authenticated again (cached briefly, so a revoked token does not read on), and is checked by
 * `check` with its principal — resolved afresh after access news.
 */
export function edgeMember<M>(
  deps: { readonly auth: EdgeAuthenticator; readonly internalKey: string },
  member: {
    readonly authorization: string | undefined;
    readonly credential: string;
    /** The ids access news may name it by (`subjectsOf` its principal). */
    readonly subjects: readonly string[];
    readonly requestId?: string | null;
    readonly onRetry?: (error: unknown) => void;
    /** Told each time this member re-opens the upstream (after its replica went away). */
    readonly onResume?: () => void;
    readonly open: (
      after: string | undefined,
      options: { metadata: Metadata; signal: AbortSignal },
    ) => AsyncIterable<M> | Promise<AsyncIterable<M>>;
    readonly check: (metadata: Metadata) => Promise<unknown>;
  },
): SharedMember<M> {
  const metadataOf = async (fresh: boolean) => {
    const { principal } = fresh
      ? await deps.auth.refresh(member.authorization)
      : await deps.auth.authenticate(member.authorization);
    return upstreamMetadata(deps.internalKey, principal, member.requestId ?? null);
  };
  let opened = false;
  return {
    credential: member.credential,
    subjects: member.subjects,
    ...(member.onRetry ? { onRetry: member.onRetry } : {}),
    open: async (after, signal) => {
      if (opened) member.onResume?.();
      opened = true;
      return member.open(after, { metadata: await metadataOf(false), signal });
    },
    check: async (fresh) => {
      await member.check(await metadataOf(fresh));
    },
  };
}
