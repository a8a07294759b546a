import type { Principal } from "./principal";

/**
 * THE credential a call is made with, for every per-credential cap (open streams, rates):
 * the user, client, machine or device the token belongs to (`<kind>:<id>`), a drone session's
 * client (`client:<clientId>`: an agent's sessions share its client's allowance), or `operator`.
 * Built from the principal alone, so a direct gRPC caller and the same caller through the
 * gateway (signed principal) count against the same allowance.
 */
export function credentialKey(principal: Principal): string {
  switch (principal.kind) {
    case "operator":
      return "operator";
    case "drone-session":
      return `client:${principal.clientId}`;
    default:
      return `${principal.kind}:${principal.subjectId}`;
  }
}
