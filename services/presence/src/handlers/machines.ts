import { LinkCloseReason } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import type { Bus } from "@unimatrix/service-kit/bus";
import type { Clock } from "@unimatrix/service-kit/clock";
import { UnauthenticatedError } from "@unimatrix/service-kit/errors";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { type PageTokens, pageSize, requireUuid } from "@unimatrix/service-kit/rules";
import type { Logger } from "pino";
import { machineMessage, machinePrincipal } from "../convert";
import type { LinkRegistry } from "../live/links";
import type { MachineAuth } from "../live/machine-auth";
import { publishSignal } from "../live/signal";
import { type WatchDeps, watchStream } from "../live/watch";
import { requireTenant } from "../rules/access";
import {
  LIST_PAGE,
  listBinding,
  positionOf,
  positionValue,
  requireMachineToken,
  validateName,
} from "../rules/machines";
import { parseCursor } from "../rules/watch";
import type { MachineStore } from "../store/machines";

/** What the machine handlers need. */
export interface MachineHandlerDeps {
  readonly machines: MachineStore;
  /** Machine tokens → machines (cached; a revocation's credential news invalidates it). */
  readonly machineAuth: MachineAuth;
  readonly registry: LinkRegistry;
  readonly bus: Bus;
  readonly clock: Clock;
  readonly logger: Logger;
  /** ListMachines' sealed page tokens. */
  readonly pageTokens: PageTokens;
  /** What WatchMachines streams need. */
  readonly watch: WatchDeps;
}

/** MachineService: every RPC, WatchMachines included (its stream body is live/watch.ts). */
export function machineHandlers(deps: MachineHandlerDeps): ServiceImpl<typeof MachineService> {
  const { machines, registry, clock } = deps;
  return {
    async registerMachine(request, ctx) {
      const principal = requireTenant(await ctx.principal(), ["user", "client"]);
      const name = validateName(request.name);
      const { machine, token } = await machines.register(principal.tenantId, name, clock.now());
      return { machine: machineMessage(machine), token };
    },

    async listMachines(request, ctx) {
      const principal = requireTenant(await ctx.principal(), ["user", "client", "machine"]);
      const limit = pageSize("page_size", request.pageSize, LIST_PAGE);
      const binding = listBinding(principal, request.includeRevoked);
      const after = positionOf(deps.pageTokens.open(request.pageToken, binding));
      const rows = await machines.list(principal.tenantId, {
        includeRevoked: request.includeRevoked,
        limit: limit + 1,
        after,
      });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        machines: page.map(machineMessage),
        nextPageToken: rows.length > limit && last ? deps.pageTokens.seal(positionValue(last), binding) : "",
      };
    },

    async getMachine(request, ctx) {
      const principal = requireTenant(await ctx.principal(), ["user", "client", "machine"]);
      const id = requireUuid("machine_id", request.machineId);
      return { machine: machineMessage(await machines.get(principal.tenantId, id)) };
    },

    async revokeMachine(request, ctx) {
      const principal = requireTenant(await ctx.principal(), ["user", "client"]);
      const id = requireUuid("machine_id", request.machineId);
      const revoked = await machines.revoke(principal.tenantId, id, clock.now());
      if (revoked.changed) {
        registry.closeLocal(id, LinkCloseReason.REVOKED);
        await publishSignal(deps.bus, deps.logger, principal.tenantId, {
          ...(revoked.event ? { seq: revoked.event.seq.toString() } : {}),
          revoked: id,
        });
        // Credential news: every replica's and gateway's cache and open streams of this machine hear it at once.
        await deps.machineAuth.revoked(id);
      }
      return { machine: machineMessage(revoked.machine) };
    },

    async authenticate(request) {
      const machine = await deps.machineAuth.authenticate(requireMachineToken(request.token));
      if (!machine) throw new UnauthenticatedError("invalid credential");
      return { principal: machinePrincipal(machine) };
    },

    async *watchMachines(request, ctx) {
      const principal = requireTenant(await ctx.principal(), ["user", "client", "machine"]);
      const after = parseCursor(request.after);
      yield* watchStream(deps.watch, principal, after, ctx);
    },
  };
}
