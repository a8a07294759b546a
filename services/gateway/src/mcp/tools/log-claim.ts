import {
  ClaimOutcome,
  ReleaseOutcome,
  RenewOutcome,
  TakeOverOutcome,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { ClaimState, type Entry } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { z } from "zod";
import { claimNote, type Viewer } from "../format";
import { entryFields } from "./refs";
import { defineTool, entryRef, IDEMPOTENT, ok } from "./spec";

/** `log_claim`: claim an entry (a fenced lease), renew or release it, or take over a stale one. */
export const logClaim = defineTool({
  name: "log_claim",
  title: "Claim an entry",
  description: "Claim an entry exclusively (a fenced lease); renew, release, or take over a stale one.",
  annotations: IDEMPOTENT,
  input: {
    entry_id: entryRef,
    action: z.enum(["claim", "renew", "release", "take_over"]).optional(),
    release: z.boolean().optional(),
    fence: z.number().int().positive().optional().describe("take_over: stale fence"),
  },
  output: { outcome: z.string(), fence: z.number().optional(), holder_drone_id: z.string().optional() },
  async run(session, input, signal) {
    const target = { cubeId: session.cubeId(), ...entryFields(input.entry_id) };
    const viewer: Viewer = { droneId: session.record.seat?.droneId, labels: new Map() };
    // `release: true` is the original input (kept: an old caller must never claim by mistake).
    const action = input.action ?? (input.release ? "release" : "claim");
    const answer = (outcome: string, claim: Entry["claim"]) => render(outcome, claim, viewer);
    const as = await session.asActor(signal);
    if (action === "release") {
      const reply = await session.upstreams.activity.releaseClaim(target, as);
      return answer(ReleaseOutcome[reply.outcome].toLowerCase(), reply.claim);
    }
    if (action === "renew") {
      const reply = await session.upstreams.activity.renewClaim(target, as);
      return answer(RenewOutcome[reply.outcome].toLowerCase(), reply.claim);
    }
    if (action === "take_over") {
      let fence = input.fence;
      if (fence === undefined) {
        // The fence of the stale claim as it is now (the caller saw it stale in a line or notice).
        const check = await session.upstreams.activity.checkFence({ ...target, fence: 1n }, as);
        fence = Number(check.claim?.fence ?? 1n) || 1;
      }
      const reply = await session.upstreams.activity.takeOverClaim(
        { ...target, fence: BigInt(fence) },
        await session.asActor(signal),
      );
      return answer(TakeOverOutcome[reply.outcome].toLowerCase(), reply.claim);
    }
    const reply = await session.upstreams.activity.claimEntry(target, as);
    return answer(ClaimOutcome[reply.outcome].toLowerCase(), reply.claim);
  },
});

/** A claim call's outcome, with the claim as the seat sees it (fence while live, the other holder). */
function render(outcome: string, claim: Entry["claim"], viewer: Viewer) {
  const other = claim?.holderDroneId && claim.holderDroneId !== viewer.droneId ? claim.holderDroneId : "";
  const live = claim && claim.state !== ClaimState.RELEASED;
  return ok(`${outcome}${claimNote(claim, viewer)}`, {
    outcome,
    ...(live && claim.fence > 0n ? { fence: Number(claim.fence) } : {}),
    ...(other ? { holder_drone_id: other } : {}),
  });
}
