import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { LinkCloseReason } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import {
  type Bus,
  type Clock,
  InvalidArgumentError,
  parseToken,
  type ServiceImpl,
  UnauthenticatedError,
} from "@unimatrix/service-kit";
import type { Logger } from "pino";
import type { LinkRegistry } from "../live/links";
import { publishSignal } from "../live/signal";
import type { ListPosition, MachineStore } from "../store/machines";
import { requireTenant, requireUuid } from "./access";
import { machineMessage } from "./convert";

/** What the machine handlers need. */
export interface MachineHandlerDeps {
  readonly machines: MachineStore;
  readonly registry: LinkRegistry;
  readonly bus: Bus;
  readonly clock: Clock;
  readonly logger: Logger;
}

const CONTROL = /\p{Cc}/u;

/** A machine name: 1-200 characters, no control characters, not blank. */
export function validateName(name: string): string {
  const length = [...name].length;
  if (length === 0 || name.trim() === "") throw new InvalidArgumentError("name", "is required");
  if (length > 200) throw new InvalidArgumentError("name", "must be at most 200 characters");
  if (CONTROL.test(name)) throw new InvalidArgumentError("name", "must not contain control characters");
  return name;
}

function pageSizeOf(value: number): number {
  if (value < 0) throw new InvalidArgumentError("page_size", "must not be negative");
  if (value === 0) return 50;
  return Math.min(value, 500);
}

function encodePosition(position: ListPosition): string {
  return Buffer.from(JSON.stringify({ n: position.name, i: position.id })).toString("base64url");
}

function decodePosition(token: string): ListPosition | null {
  if (token === "") return null;
  try {
    const value = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as { n?: unknown; i?: unknown };
    if (typeof value.n === "string" && typeof value.i === "string") {
      requireUuid("page_token", value.i);
      return { name: value.n, id: value.i };
    }
  } catch {
    // fall through
  }
  throw new InvalidArgumentError("page_token", "is not a token from a previous ListMachines response");
}

/** Unary RPCs of MachineService (WatchMachines lives in watch.ts). */
export function machineHandlers(deps: MachineHandlerDeps): Omit<ServiceImpl<typeof MachineService>, "watchMachines"> {
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
      const limit = pageSizeOf(request.pageSize);
      const after = decodePosition(request.pageToken);
      const rows = await machines.list(principal.tenantId, {
        includeRevoked: request.includeRevoked,
        limit: limit + 1,
        after,
      });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        machines: page.map(machineMessage),
        nextPageToken: rows.length > limit && last ? encodePosition({ name: last.name, id: last.id }) : "",
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
      }
      return { machine: machineMessage(revoked.machine) };
    },

    async authenticate(request) {
      if (request.token === "") throw new InvalidArgumentError("token", "is required");
      const parsed = parseToken(request.token);
      if (parsed?.kind !== "machine") throw new UnauthenticatedError("not a machine credential");
      const machine = await machines.authenticate(parsed);
      if (!machine) throw new UnauthenticatedError("invalid credential");
      return {
        principal: {
          kind: PrincipalKind.MACHINE,
          tenantId: machine.tenantId,
          subjectId: machine.id,
          credentialId: machine.id,
          displayName: machine.name,
          expiresAt: undefined,
        },
      };
    },
  };
}
