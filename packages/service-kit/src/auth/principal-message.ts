import { timestampMs } from "@bufbuild/protobuf/wkt";
import { PrincipalKind, type Principal as PrincipalMessage } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import type { Principal } from "./principal";

const TO_WIRE: Record<Principal["kind"], PrincipalKind> = {
  operator: PrincipalKind.OPERATOR,
  user: PrincipalKind.USER,
  client: PrincipalKind.CLIENT,
  "drone-session": PrincipalKind.DRONE_SESSION,
  machine: PrincipalKind.MACHINE,
  device: PrincipalKind.DEVICE,
};

/** The wire kind (`unimatrix.auth.v1.PrincipalKind`) of a principal kind; UNSPECIFIED for anything else. */
export function principalKindOf(kind: Principal["kind"] | string): PrincipalKind {
  return TO_WIRE[kind as Principal["kind"]] ?? PrincipalKind.UNSPECIFIED;
}

/** The principal in a `unimatrix.auth.v1.Principal` (what every `Authenticate` returns); null if unusable. */
export function principalFromMessage(message: PrincipalMessage | undefined): Principal | null {
  if (!message) return null;
  switch (message.kind) {
    case PrincipalKind.OPERATOR:
      return { kind: "operator", subjectId: "operator", tenantId: null };
    case PrincipalKind.USER:
    case PrincipalKind.CLIENT:
    case PrincipalKind.MACHINE:
    case PrincipalKind.DEVICE: {
      if (!message.tenantId || !message.subjectId) return null;
      const kind = (Object.keys(TO_WIRE) as Principal["kind"][]).find((k) => TO_WIRE[k] === message.kind) as
        | "user"
        | "client"
        | "machine"
        | "device";
      return {
        kind,
        subjectId: message.subjectId,
        tenantId: message.tenantId,
        ...(message.credentialId ? { credentialId: message.credentialId } : {}),
        ...(message.expiresAt ? { expiresAt: timestampMs(message.expiresAt) } : {}),
      };
    }
    case PrincipalKind.DRONE_SESSION:
      if (!message.tenantId || !message.subjectId || !message.cubeId || !message.droneId) return null;
      return {
        kind: "drone-session",
        subjectId: message.subjectId,
        tenantId: message.tenantId,
        clientId: message.clientId,
        cubeId: message.cubeId,
        droneId: message.droneId,
        ...(message.credentialId ? { credentialId: message.credentialId } : {}),
        ...(message.expiresAt ? { expiresAt: timestampMs(message.expiresAt) } : {}),
      };
    default:
      return null;
  }
}
