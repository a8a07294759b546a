import { randomUUID } from "node:crypto";
import {
  create,
  type DescMessage,
  type DescMethodUnary,
  type DescService,
  fromJson,
  type MessageInitShape,
  type MessageShape,
  toJson,
} from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { CubeAccess, RoleClass } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { DomainError } from "../errors";
import { createClient, type TypedClient } from "../grpc/client";
import { isServiceError } from "../grpc/status";

/** Where the cube contract is served: a gRPC address (`host:port`, cube itself) or a Connect base URL (the gateway). */
export type SeedTarget = { readonly grpc: string } | { readonly connect: string };

/** A failed seeding call: which RPC, and the status it answered (kept as the error's code). */
class SeedError extends DomainError {
  constructor(
    readonly method: string,
    code: status,
    detail: string,
  ) {
    super(code, `${method}: ${(status[code] ?? "unknown").toLowerCase()}: ${detail}`);
  }
}

/** What to seed besides the tenant and its admin user. */
export interface SeedOptions {
  /** The operator token (only the operator creates tenants). */
  readonly operatorToken: string;
  readonly tenant: string;
  readonly adminDisplayName?: string;
  /** A cube (default: none). */
  readonly cube?: { readonly name: string; readonly directive?: string };
  /** The cube's default role (default when a cube is asked for: `worker`, broadcasting, WORKER class). */
  readonly role?: { readonly name?: string; readonly canBroadcast?: boolean };
  /** Client names to issue; each gets WRITE on the cube when there is one. */
  readonly clients?: readonly string[];
}

/** What was seeded; tokens are shown once by the service, so keep them. */
export interface Seeded {
  readonly tenantId: string;
  readonly userId: string;
  readonly userToken: string;
  readonly cubeId?: string;
  readonly roleId?: string;
  readonly clients: readonly { readonly name: string; readonly id: string; readonly token: string }[];
}

type Unary = DescMethodUnary<DescMessage, DescMessage>;

interface Caller {
  call<M extends Unary>(
    method: M,
    request: MessageInitShape<M["input"]>,
    token: string,
  ): Promise<MessageShape<M["output"]>>;
  close(): void;
}

function grpcCaller(address: string): Caller {
  const clients = new Map<string, TypedClient<DescService>>();
  const clientOf = (method: Unary) => {
    let client = clients.get(method.parent.typeName);
    if (!client) {
      client = createClient(method.parent, address);
      clients.set(method.parent.typeName, client);
    }
    return client as unknown as Record<string, (r: unknown, o: unknown) => Promise<unknown>>;
  };
  return {
    async call(method, request, token) {
      try {
        const fn = clientOf(method)[method.localName] as (r: unknown, o: unknown) => Promise<unknown>;
        return (await fn(request, { metadata: { authorization: `Bearer ${token}` } })) as never;
      } catch (error) {
        if (isServiceError(error)) throw new SeedError(method.name, error.code, error.details);
        throw error;
      }
    },
    close() {
      for (const client of clients.values()) client.close();
    },
  };
}

function connectCaller(base: string): Caller {
  const root = base.replace(/\/$/, "");
  return {
    async call(method, request, token) {
      const response = await fetch(`${root}/${method.parent.typeName}/${method.name}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify(toJson(method.input, create(method.input, request))),
      });
      const text = await response.text();
      const body = text ? (JSON.parse(text) as { code?: string; message?: string }) : {};
      if (!response.ok) {
        const name = (body.code ?? "unknown").toUpperCase() as keyof typeof status;
        throw new SeedError(method.name, status[name] ?? status.UNKNOWN, body.message ?? `HTTP ${response.status}`);
      }
      return fromJson(method.output, body as never, { ignoreUnknownFields: true }) as never;
    },
    close() {},
  };
}

/**
 * Seeds a tenant and its admin user, optionally a cube with a default role and clients with
 * WRITE on it, through the cube contract only (gRPC to cube, or Connect through the gateway):
 * what `npm run bootstrap` does and what system tests start from.
 */
export async function seedTenant(target: SeedTarget, options: SeedOptions): Promise<Seeded> {
  const caller = "grpc" in target ? grpcCaller(target.grpc) : connectCaller(target.connect);
  try {
    const tenant = await caller.call(
      IdentityService.method.createTenant,
      { name: options.tenant, adminDisplayName: options.adminDisplayName ?? `${options.tenant} admin` },
      options.operatorToken,
    );
    const userToken = tenant.adminUserToken;
    let cubeId: string | undefined;
    let roleId: string | undefined;
    if (options.cube) {
      const cube = await caller.call(
        CubeService.method.createCube,
        { requestKey: randomUUID(), name: options.cube.name, directive: options.cube.directive ?? "Coordinate here." },
        userToken,
      );
      cubeId = cube.cube?.id;
      const role = await caller.call(
        CubeService.method.createRole,
        {
          cubeId: cubeId ?? "",
          name: options.role?.name ?? "worker",
          isDefault: true,
          canBroadcast: options.role?.canBroadcast ?? true,
          roleClass: RoleClass.WORKER,
        },
        userToken,
      );
      roleId = role.role?.id;
    }
    const clients: { name: string; id: string; token: string }[] = [];
    for (const name of options.clients ?? []) {
      const issued = await caller.call(IdentityService.method.issueClient, { name }, userToken);
      const id = issued.client?.id ?? "";
      if (cubeId) {
        await caller.call(
          IdentityService.method.setCubeGrant,
          { clientId: id, cubeId, access: CubeAccess.WRITE },
          userToken,
        );
      }
      clients.push({ name, id, token: issued.token });
    }
    return {
      tenantId: tenant.tenant?.id ?? "",
      userId: tenant.adminUser?.id ?? "",
      userToken,
      ...(cubeId ? { cubeId } : {}),
      ...(roleId ? { roleId } : {}),
      clients,
    };
  } finally {
    caller.close();
  }
}
