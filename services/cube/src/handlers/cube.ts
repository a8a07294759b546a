import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type CubeService, RoleSectionOp } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { RoleClass } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { InvalidArgumentError, type ServiceImpl } from "@unimatrix/service-kit";
import { attachToWire, cubeToWire, droneToWire, roleToWire } from "../convert";
import { MANAGE } from "../rules/access";
import {
  boundedBytes,
  decodePageToken,
  encodePageToken,
  enumValue,
  MAX_DOCUMENT_BYTES,
  name,
  optionalUuid,
  pageSize,
  shortText,
  uuid,
} from "../rules/request";
import type { SectionOp } from "../rules/sections";
import { taxonomy } from "../rules/taxonomy";
import { createCube, getCube, listCubes, updateCube } from "../store/cubes";
import { createRole, listRoles, patchRoleSection, type RoleFields, updateRole } from "../store/roles";
import { attachSeat, dronesSince, evictDrone, listDrones } from "../store/seats";
import type { CubeDeps } from "./deps";

const CLASSES = [RoleClass.QUEEN, RoleClass.WORKER] as const;
const className = (c: RoleClass): "queen" | "worker" => (c === RoleClass.QUEEN ? "queen" : "worker");
const OPS: Record<number, SectionOp> = {
  [RoleSectionOp.ADD]: "add",
  [RoleSectionOp.REPLACE]: "replace",
  [RoleSectionOp.REMOVE]: "remove",
};

/** CubeService: cubes, roles and seats. */
export function cubeHandlers(deps: CubeDeps): ServiceImpl<typeof CubeService> {
  return {
    async createCube(request, ctx) {
      const requestKey = uuid("request_key", request.requestKey);
      const cubeName = name("name", request.name, 200);
      const directive = boundedBytes("directive", request.directive, MAX_DOCUMENT_BYTES);
      const taxonomyJson =
        request.taxonomyJson === undefined || request.taxonomyJson === ""
          ? undefined
          : taxonomy("taxonomy_json", request.taxonomyJson);
      const { cube, created } = await createCube(deps, await ctx.principal(), {
        requestKey,
        name: cubeName,
        directive,
        taxonomyJson,
      });
      return { cube: cubeToWire(cube, MANAGE), created };
    },

    async listCubes(request, ctx) {
      const size = pageSize(request.pageSize);
      const offset = decodePageToken(request.pageToken, "cubes");
      const rows = await listCubes(deps, await ctx.principal(), offset, size);
      return {
        cubes: rows.slice(0, size).map((r) => cubeToWire(r.cube, r.access)),
        nextPageToken: rows.length > size ? encodePageToken(offset + size, "cubes") : "",
      };
    },

    async getCube(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const { cube, access } = await getCube(deps, await ctx.principal(), cubeId);
      return { cube: cubeToWire(cube, access) };
    },

    async updateCube(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const directive =
        request.directive === undefined ? undefined : boundedBytes("directive", request.directive, MAX_DOCUMENT_BYTES);
      const taxonomyJson =
        request.taxonomyJson === undefined || request.taxonomyJson === ""
          ? request.taxonomyJson
          : taxonomy("taxonomy_json", request.taxonomyJson);
      const { cube, access } = await updateCube(deps, await ctx.principal(), cubeId, { directive, taxonomyJson });
      return { cube: cubeToWire(cube, access) };
    },

    async createRole(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const fields: RoleFields = {
        name: name("name", request.name, 100),
        shortDescription: shortText("short_description", request.shortDescription, 500),
        detailedDescription: boundedBytes("detailed_description", request.detailedDescription, MAX_DOCUMENT_BYTES),
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
      return { role: roleToWire(await createRole(deps, await ctx.principal(), cubeId, fields)) };
    },

    async updateRole(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const roleId = uuid("role_id", request.roleId);
      const change: Partial<RoleFields> = {};
      if (request.name !== undefined) change.name = name("name", request.name, 100);
      if (request.shortDescription !== undefined)
        change.shortDescription = shortText("short_description", request.shortDescription, 500);
      if (request.detailedDescription !== undefined)
        change.detailedDescription = boundedBytes(
          "detailed_description",
          request.detailedDescription,
          MAX_DOCUMENT_BYTES,
        );
      if (request.roleClass !== undefined)
        change.roleClass = className(enumValue("role_class", request.roleClass, CLASSES));
      if (request.isDefault !== undefined) change.isDefault = request.isDefault;
      if (request.mandatory !== undefined) change.mandatory = request.mandatory;
      if (request.humanSeat !== undefined) change.humanSeat = request.humanSeat;
      if (request.canBroadcast !== undefined) change.canBroadcast = request.canBroadcast;
      if (request.receivesAllDirect !== undefined) change.receivesAllDirect = request.receivesAllDirect;
      if (Object.keys(change).length === 0) throw new InvalidArgumentError("role", "set at least one field to change");
      return { role: roleToWire(await updateRole(deps, await ctx.principal(), cubeId, roleId, change)) };
    },

    async listRoles(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const size = pageSize(request.pageSize);
      const scope = `roles:${cubeId}`;
      const offset = decodePageToken(request.pageToken, scope);
      const rows = await listRoles(deps, await ctx.principal(), cubeId, offset, size);
      return {
        roles: rows.slice(0, size).map(roleToWire),
        nextPageToken: rows.length > size ? encodePageToken(offset + size, scope) : "",
      };
    },

    async patchRoleSection(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const roleId = uuid("role_id", request.roleId);
      const op = OPS[request.op];
      if (!op) throw new InvalidArgumentError("op", "must be ADD, REPLACE or REMOVE");
      const section = request.section.trim();
      if (section === "" || section.includes("\n"))
        throw new InvalidArgumentError("section", "must be one non-empty line");
      shortText("section", section, 200);
      if (op === "remove" && request.text !== "") throw new InvalidArgumentError("text", "must be empty for REMOVE");
      boundedBytes("text", request.text, MAX_DOCUMENT_BYTES);
      const role = await patchRoleSection(deps, await ctx.principal(), cubeId, roleId, op, section, request.text);
      return { role: roleToWire(role) };
    },

    async attachSeat(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const roleId = optionalUuid("role_id", request.roleId);
      const priorDroneId = optionalUuid("prior_drone_id", request.priorDroneId);
      const hostname = shortText("hostname", request.hostname, 255);
      const result = await attachSeat(deps, await ctx.principal(), {
        cubeId,
        roleId,
        priorDroneId,
        sessionToken: request.sessionToken,
        hostname,
      });
      return attachToWire(result);
    },

    async listDrones(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const size = pageSize(request.pageSize);
      const scope = `drones:${cubeId}:${request.includeEvicted}`;
      const offset = decodePageToken(request.pageToken, scope);
      const views = await listDrones(deps, await ctx.principal(), cubeId, request.includeEvicted, offset, size);
      return {
        drones: views.slice(0, size).map(droneToWire),
        nextPageToken: views.length > size ? encodePageToken(offset + size, scope) : "",
      };
    },

    async dronesSince(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const anchor = request.anchor;
      let parsed: { time: Date } | { entryId: string };
      if (anchor.case === "sinceTime") parsed = { time: timestampDate(anchor.value) };
      else if (anchor.case === "sinceEntryId") parsed = { entryId: uuid("since_entry_id", anchor.value) };
      else throw new InvalidArgumentError("anchor", "set since_time or since_entry_id");
      const { drones, anchorTime } = await dronesSince(deps, await ctx.principal(), cubeId, parsed);
      return { drones: drones.map(droneToWire), anchorTime: timestampFromDate(anchorTime) };
    },

    async evictDrone(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const droneId = uuid("drone_id", request.droneId);
      const { drone, revoked } = await evictDrone(deps, await ctx.principal(), cubeId, droneId);
      return { drone: droneToWire(drone), revokedSessionCount: revoked };
    },
  };
}
