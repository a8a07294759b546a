import type { StreamCaps, StreamSlot } from "../fleet/streams";

/**
 * Push streams (`GET /mcp`) one MCP session may hold at once, across every gateway replica: one
 * live stream plus one reconnect (`Last-Event-ID`) that arrives before the gateway has seen the
 * old connection close.
 */
const MAX_PUSH_STREAMS_PER_SESSION = 2;

/** What the push stream caps need. */
export interface PushCaps {
  /** The fleet-wide stream slots SSE streams count in too. */
  readonly caps: StreamCaps;
  /** Open streams per credential (`GATEWAY_MAX_STREAMS_PER_CREDENTIAL`), SSE and MCP push together. */
  readonly maxStreams: number;
}

/**
 * Slots for one more push stream of session `sessionId` of credential `credentialKey`: one in the
 * credential's fleet-wide stream cap (the one its SSE streams count against) and one in the
 * session's. Resolves with the refusal's text instead when either is full (the caller answers 429).
 */
export async function openPushSlots(
  deps: PushCaps,
  credentialKey: string,
  sessionId: string,
): Promise<StreamSlot | string> {
  const session = await deps.caps.open(`mcp-push:${sessionId}`, MAX_PUSH_STREAMS_PER_SESSION);
  if (!session) {
    return `this MCP session already holds ${MAX_PUSH_STREAMS_PER_SESSION} push streams across the gateways; close one first`;
  }
  const credential = await deps.caps.open(credentialKey);
  if (!credential) {
    await session.release();
    return `this credential already holds ${deps.maxStreams} open streams across the gateways; close one first`;
  }
  return {
    release: async () => {
      await Promise.all([credential.release(), session.release()]);
    },
  };
}
