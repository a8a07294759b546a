import { PrincipalKind, type Principal as PrincipalMessage } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import type { Principal } from "@unimatrix/service-kit";

/** The kit's principal from the `unimatrix.auth.v1.Principal` an `Authenticate` returned; null if unusable. */
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
      const kind = (
        {
          [PrincipalKind.USER]: "user",
          [PrincipalKind.CLIENT]: "client",
          [PrincipalKind.MACHINE]: "machine",
          [PrincipalKind.DEVICE]: "device",
        } as const
      )[message.kind];
      return { kind, subjectId: message.subjectId, tenantId: message.tenantId };
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
      };
    default:
      return null;
  }
}
