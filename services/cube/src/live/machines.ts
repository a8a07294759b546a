import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { PRINCIPAL_HEADER, type Principal, signPrincipal } from "@unimatrix/service-kit/auth";
import { FailedPreconditionError, NotFoundError, UnavailableError } from "@unimatrix/service-kit/errors";
import { createClient, isServiceError, type TypedClient } from "@unimatrix/service-kit/grpc";

/** gRPC codes presence answers for a machine the caller may not see (it never says which). */
const NOT_YOURS = new Set([3 /* INVALID_ARGUMENT */, 5 /* NOT_FOUND */, 7 /* PERMISSION_DENIED */]);

/**
 * The machines of presence, asked over gRPC *as the caller* (its principal signed with the
 * internal key, as the gateway forwards principals), so presence itself decides what the caller's
 * tenant owns: cube never reads presence's tables. The client is dialled on first use, since the
 * composition starts presence after cube.
 */
export class MachineDirectory {
  #client: TypedClient<typeof MachineService> | undefined;

  constructor(
    /** Presence's gRPC target when known (undefined: not configured, machine ids are taken unchecked). */
    private readonly address: () => string | undefined,
    private readonly internalKey: string,
    private readonly deadlineMs = 5_000,
  ) {}

  /**
   * Resolves when `machineId` is an active machine of the caller's tenant. NOT_FOUND naming
   * `machine_id` for a machine of another tenant or none (no existence oracle), FAILED_PRECONDITION
   * for a revoked one of the caller's, UNAVAILABLE while presence cannot answer (never INTERNAL).
   */
  async requireOwn(principal: Principal, machineId: string): Promise<void> {
    const address = this.address();
    if (address === undefined) return;
    this.#client ??= createClient(MachineService, address);
    let revoked: boolean;
    try {
      const { machine } = await this.#client.getMachine(
        { machineId },
        {
          metadata: { [PRINCIPAL_HEADER]: signPrincipal(principal, this.internalKey) },
          deadline: this.deadlineMs,
        },
      );
      if (!machine || machine.id !== machineId || machine.tenantId !== principal.tenantId) {
        throw new NotFoundError("machine_id: machine not found");
      }
      revoked = machine.revokedAt !== undefined;
    } catch (error) {
      if (error instanceof NotFoundError) throw error;
      if (isServiceError(error) && NOT_YOURS.has(error.code)) throw new NotFoundError("machine_id: machine not found");
      throw new UnavailableError("machine_id cannot be checked now (the presence service is unavailable); try again");
    }
    if (revoked) throw new FailedPreconditionError("machine_id: the machine is revoked");
  }

  close(): void {
    this.#client?.close();
  }
}
