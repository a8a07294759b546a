import { randomUUID } from "node:crypto";
import { FLEET_OPERATOR_TOKEN } from "./fleet";

/** A Connect JSON call as any script makes it; throws on a non-200 answer. */
async function connectCall<T = Record<string, unknown>>(
  gateway: string,
  path: string,
  body: unknown,
  token: string,
): Promise<T> {
  const response = await fetch(`${gateway}/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

/** A client credential with WRITE on the cube. */
export interface SeededClient {
  readonly id: string;
  readonly token: string;
}

/** A registered machine and its credential. */
export interface SeededMachine {
  readonly id: string;
  readonly name: string;
  readonly token: string;
}

/** What the load works on: one tenant, one cube with a broadcasting default role, clients, machines. */
export interface World {
  readonly tenantId: string;
  readonly userToken: string;
  readonly cubeId: string;
  readonly roleId: string;
  readonly clients: SeededClient[];
  readonly machines: SeededMachine[];
}

/** Creates the world through a gateway with the operator token, as `npm run bootstrap` would. */
export async function seedWorld(gateway: string, clients: number, machines: number): Promise<World> {
  const tenant = await connectCall<{ tenant: { id: string }; adminUserToken: string }>(
    gateway,
    "unimatrix.cube.v1.IdentityService/CreateTenant",
    { name: "fleet", adminDisplayName: "fleet admin" },
    FLEET_OPERATOR_TOKEN,
  );
  const user = tenant.adminUserToken;
  const cube = await connectCall<{ cube: { id: string } }>(
    gateway,
    "unimatrix.cube.v1.CubeService/CreateCube",
    { requestKey: randomUUID(), name: "fleet cube", directive: "survive" },
    user,
  );
  const role = await connectCall<{ role: { id: string } }>(
    gateway,
    "unimatrix.cube.v1.CubeService/CreateRole",
    { cubeId: cube.cube.id, name: "worker", isDefault: true, canBroadcast: true },
    user,
  );
  const issued: SeededClient[] = [];
  for (let i = 0; i < clients; i++) {
    const client = await connectCall<{ client: { id: string }; token: string }>(
      gateway,
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: `fleet-client-${i}` },
      user,
    );
    await connectCall(
      gateway,
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: client.client.id, cubeId: cube.cube.id, access: "CUBE_ACCESS_WRITE" },
      user,
    );
    issued.push({ id: client.client.id, token: client.token });
  }
  const registered: SeededMachine[] = [];
  for (let i = 0; i < machines; i++) {
    const name = `fleet-machine-${i}`;
    const machine = await connectCall<{ machine: { id: string }; token: string }>(
      gateway,
      "unimatrix.presence.v1.MachineService/RegisterMachine",
      { name },
      user,
    );
    registered.push({ id: machine.machine.id, name, token: machine.token });
  }
  return {
    tenantId: tenant.tenant.id,
    userToken: user,
    cubeId: cube.cube.id,
    roleId: role.role.id,
    clients: issued,
    machines: registered,
  };
}
