import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type CubeService, RoleSectionOp } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { RoleClass } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { credentialKey } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { optionalUuid, pageSize, requireUuid } from "@unimatrix/service-kit/rules";
import {
  attachToWire,
  cubeToWire,
  dronesSinceToWire,
  droneToWire,
  entryToWire,
  roleToWire,
  seatStateFromWire,
} from "../convert";
import type { CubeDeps } from "../deps";
import { runOp } from "../effects";
import { attachSeat } from "../ops/attach-seat";
import { createCube } from "../ops/create-cube";
import { evictDrone } from "../ops/evict-drone";
import { createRole, patchRoleSection, type RoleFields, updateRole } from "../ops/roles";
import { setSeatState } from "../ops/seat-state";
import { updateCube } from "../ops/update-cube";
import { getCube, listCubes } from "../reads/cubes";
import { dronesSince, listDrones } from "../reads/drones";
import { listRoles } from "../reads/roles";
import { MANAGE } from "../rules/access";
import type { EntryRef } from "../rules/entry";
import { OffsetPages } from "../rules/paging";
import { enumValue, name } from "../rules/request";
import type { SectionOp } from "../rules/sections";
import { taxonomy } from "../rules/taxonomy";

const CLASSES = [RoleClass.QUEEN, RoleClass.WORKER] as const;
const className = (c: RoleClass): "queen" | "worker" => (c === RoleClass.QUEEN ? "queen" : "worker");
const OPS: Record<number, SectionOp> = {
  [RoleSectionOp.ADD]: "add",
  [RoleSectionOp.REPLACE]: "replace",
  [RoleSectionOp.REMOVE]: "remove",
};

/** CubeService: cubes, roles and seats. */
export function cubeHandlers(deps: CubeDeps): ServiceImpl<typeof CubeService> {
  const cubePages = new OffsetPages(deps.internalKey, "ListCubes");
  const rolePages = new OffsetPages(deps.internalKey, "ListRoles");
  const dronePages = new OffsetPages(deps.internalKey, "ListDrones");
  return {
    async createCube(request, ctx) {
      const requestKey = requireUuid("request_key", request.requestKey);
      const cubeName = name("name", request.name);
      const directive = request.directive;
      const taxonomyJson =
        request.taxonomyJson === undefined || request.taxonomyJson === ""
          ? undefined
          : taxonomy("taxonomy_json", request.taxonomyJson);
      const { cube, created } = await runOp(
        deps,
        createCube(deps, await ctx.principal(), { requestKey, name: cubeName, directive, taxonomyJson }),
      );
      return { cube: cubeToWire(cube, MANAGE), created };
    },

    async listCubes(request, ctx) {
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const binding = { caller: credentialKey(principal) };
      const offset = cubePages.offset(request.pageToken, binding);
      const page = cubePages.page(await listCubes(deps, principal, offset, size), offset, size, binding);
      return { cubes: page.rows.map((r) => cubeToWire(r.cube, r.access)), nextPageToken: page.next };
    },

    async getCube(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const { cube, access } = await getCube(deps, await ctx.principal(), cubeId);
      return { cube: cubeToWire(cube, access) };
    },

    async updateCube(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const directive = request.directive;
      const taxonomyJson =
        request.taxonomyJson === undefined || request.taxonomyJson === ""
          ? request.taxonomyJson
          : taxonomy("taxonomy_json", request.taxonomyJson);
      const { cube, access } = await runOp(
        deps,
        updateCube(deps, await ctx.principal(), cubeId, {
          directive,
          taxonomyJson,
          ...(request.retention
            ? { retention: { maxAgeSeconds: request.retention.maxAgeSeconds, maxItems: request.retention.maxItems } }
            : {}),
        }),
      );
      return { cube: cubeToWire(cube, access) };
    },

    async createRole(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const fields: RoleFields = {
        name: name("name", request.name),
        shortDescription: request.shortDescription,
        detailedDescription: request.detailedDescription,
        roleClass:
          request.roleClass === RoleClass.UNSPECIFIED
            ? "worker"
            : className(enumValue("role_class", request.roleClass, CLASSES)),
        isDefault: request.isDefault,
        mandatory: request.mandatory,
        humanSeat: request.humanSeat,
        canBroadcast: request.canBroadcast,
        receivesAllDirect: request.receivesAllDirect,
      };
      return { role: roleToWire(await runOp(deps, createRole(deps, await ctx.principal(), cubeId, fields))) };
    },

    async updateRole(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const roleId = requireUuid("role_id", request.roleId);
      const change: Partial<RoleFields> = {};
      if (request.name !== undefined) change.name = name("name", request.name);
      if (request.shortDescription !== undefined) change.shortDescription = request.shortDescription;
      if (request.detailedDescription !== undefined) change.detailedDescription = request.detailedDescription;
      if (request.roleClass !== undefined)
        change.roleClass = className(enumValue("role_class", request.roleClass, CLASSES));
      if (request.isDefault !== undefined) change.isDefault = request.isDefault;
      if (request.mandatory !== undefined) change.mandatory = request.mandatory;
      if (request.humanSeat !== undefined) change.humanSeat = request.humanSeat;
      if (request.canBroadcast !== undefined) change.canBroadcast = request.canBroadcast;
      if (request.receivesAllDirect !== undefined) change.receivesAllDirect = request.receivesAllDirect;
      if (Object.keys(change).length === 0) throw new InvalidArgumentError("role", "set at least one field to change");
      return { role: roleToWire(await runOp(deps, updateRole(deps, await ctx.principal(), cubeId, roleId, change))) };
    },

    async listRoles(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const binding = { caller: credentialKey(principal), filter: { cubeId } };
      const offset = rolePages.offset(request.pageToken, binding);
      const page = rolePages.page(await listRoles(deps, principal, cubeId, offset, size), offset, size, binding);
      return { roles: page.rows.map(roleToWire), nextPageToken: page.next };
    },

    async patchRoleSection(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const roleId = requireUuid("role_id", request.roleId);
      const op = OPS[request.op];
      if (!op) throw new InvalidArgumentError("op", "must be ADD, REPLACE or REMOVE");
      const section = request.section.trim();
      if (section === "" || section.includes("\n"))
        throw new InvalidArgumentError("section", "must be one non-empty line");
      if (op === "remove" && request.text !== "") throw new InvalidArgumentError("text", "must be empty for REMOVE");
      const role = await runOp(
        deps,
        patchRoleSection(deps, await ctx.principal(), cubeId, roleId, op, section, request.text),
      );
      return { role: roleToWire(role) };
    },

    async attachSeat(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const roleId = optionalUuid("role_id", request.roleId);
      const priorDroneId = optionalUuid("prior_drone_id", request.priorDroneId);
      const hostname = request.hostname;
      const machineId = optionalUuid("machine_id", request.machineId);
      const result = await runOp(
        deps,
        attachSeat(deps, await ctx.principal(), {
          cubeId,
          roleId,
          priorDroneId,
          sessionToken: request.sessionToken,
          hostname,
          machineId,
        }),
      );
      return attachToWire(result);
    },

    async listDrones(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const binding = { caller: credentialKey(principal), filter: { cubeId, includeEvicted: request.includeEvicted } };
      const offset = dronePages.offset(request.pageToken, binding);
      const rows = await listDrones(deps, principal, cubeId, request.includeEvicted, offset, size);
      const page = dronePages.page(rows, offset, size, binding);
      return { drones: page.rows.map(droneToWire), nextPageToken: page.next };
    },

    async dronesSince(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const anchor = request.anchor;
      let parsed: { time: Date } | { entry: EntryRef };
      if (anchor.case === "sinceTime") parsed = { time: timestampDate(anchor.value) };
      else if (anchor.case === "sinceEntryId")
        parsed = { entry: { field: "since_entry_id", id: requireUuid("since_entry_id", anchor.value) } };
      else if (anchor.case === "sincePosition") parsed = { entry: { field: "since_position", position: anchor.value } };
      else throw new InvalidArgumentError("anchor", "set since_time, since_entry_id or since_position");
      return dronesSinceToWire(await dronesSince(deps, await ctx.principal(), cubeId, parsed));
    },

    async evictDrone(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const droneId = requireUuid("drone_id", request.droneId);
      const { drone, revoked } = await runOp(deps, evictDrone(deps, await ctx.principal(), cubeId, droneId));
      return { drone: droneToWire(drone), revokedSessionCount: revoked };
    },

    async setSeatState(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const state = seatStateFromWire(request.state);
      const result = await runOp(deps, setSeatState(deps, await ctx.principal(), cubeId, state, request.note));
      return {
        drone: droneToWire(result.drone),
        changed: result.entry !== null,
        entry: result.entry ? entryToWire(result.entry) : undefined,
      };
    },
  };
}
