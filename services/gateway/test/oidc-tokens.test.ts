import { status } from "@grpc/grpc-js";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { asBearer, eventually, expectStatus } from "@unimatrix/service-kit/testing";
import { SCOPE, SERVICE_CLIENT, TestProvider } from "./oidc-provider";
import { sseStream } from "./stream-probes";
import { call, connectJson, freePort, type System, seedTenant, startSystem } from "./system";

// The gateway and cube accept the company's identity provider's JWT access tokens beside
// Unimatrix's own: a real OpenID provider (oidc-provider) on a local port issues them; tokens
// signed by hand with its key (or another) make the refusal cases.

const GET_CUBE = "unimatrix.cube.v1.CubeService/GetCube";
const LINK = "unimatrix.cube.v1.IdentityService/LinkIdentity";
const UNLINK = "unimatrix.cube.v1.IdentityService/UnlinkIdentity";

describe("access tokens of the company's identity provider", () => {
  let provider: TestProvider;
  let system: System;
  let tenant: Awaited<ReturnType<typeof seedTenant>>;
  let base: string;
  let challenge: { api: string; mcp: string };

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    provider = await TestProvider.start(base);
    const oidc = { oidcIssuer: provider.issuer, oidcAudience: base, oidcScope: SCOPE };
    system = await startSystem("gw_oidc_tokens", { port, ...oidc }, "postgres", { ...oidc, jwksCooldownMs: 0 });
    tenant = await seedTenant(system, "oidc", 2);
    // A person's subject acts as client 0; the service account acts as client 1.
    await call(system, LINK, { subject: "person-1", clientId: tenant.clients[0]!.id }, tenant.user);
    await call(system, LINK, { subject: SERVICE_CLIENT.id, clientId: tenant.clients[1]!.id }, tenant.user);
    challenge = {
      api: `Bearer realm="unimatrix", resource_metadata="${base}/.well-known/oauth-protected-resource", scope="${SCOPE}"`,
      mcp: `Bearer realm="unimatrix", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp", scope="${SCOPE}"`,
    };
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
    await provider?.stop();
  });

  /** An MCP initialize with a bearer token: the HTTP status and the challenge. */
  async function mcpInitialize(token: string) {
    const response = await fetch(`${system.url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } },
      }),
    });
    await response.body?.cancel();
    return { status: response.status, challenge: response.headers.get("www-authenticate") };
  }

  test("the Protected Resource Metadata of the gateway and of /mcp name the provider and the scope", async () => {
    for (const [path, resource] of [
      ["/.well-known/oauth-protected-resource", base],
      ["/.well-known/oauth-protected-resource/mcp", `${base}/mcp`],
    ] as const) {
      const response = await fetch(`${system.url}${path}`);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({
        resource,
        authorization_servers: [provider.issuer],
        scopes_supported: [SCOPE],
        bearer_methods_supported: ["header"],
        resource_name: "Unimatrix",
      });
    }
  });

  test("a valid token acts as the linked client on Connect and on /mcp; a client-credentials token as its service account", async () => {
    const person = await provider.mint({ sub: "person-1" });
    const got = await call<{ cube: { id: string } }>(system, GET_CUBE, { cubeId: tenant.cubeId }, person);
    expect(got.cube.id).toBe(tenant.cubeId);
    expect((await mcpInitialize(person)).status).toBe(200);
    const service = await provider.clientCredentialsToken();
    const listed = await call<{ clients: { id: string }[] }>(
      system,
      "unimatrix.cube.v1.IdentityService/ListClients",
      {},
      service,
    );
    // A client sees only itself: the service account is client 1.
    expect(listed.clients.map((c) => c.id)).toEqual([tenant.clients[1]!.id]);
  });

  test("the scope may come as `scp`, a list (Entra ID, Okta), and `azp` names a service account without `sub`", async () => {
    const listed = await provider.mint({ sub: "person-1", scope: undefined, scp: ["openid", SCOPE] });
    expect((await connectJson(system, GET_CUBE, { cubeId: tenant.cubeId }, listed)).status).toBe(200);
    const service = await provider.mint({ sub: undefined, azp: SERVICE_CLIENT.id });
    const clients = await call<{ clients: { id: string }[] }>(
      system,
      "unimatrix.cube.v1.IdentityService/ListClients",
      {},
      service,
    );
    expect(clients.clients.map((c) => c.id)).toEqual([tenant.clients[1]!.id]);
  });

  test.each([
    ["a wrong issuer", { iss: "http://127.0.0.1:1/other" }, {}, "iss"],
    ["a wrong audience (another resource)", { aud: "https://elsewhere.example.com" }, {}, "aud"],
    ["a signature by a key the provider never published", {}, { foreignKey: true }, "signature"],
    ["an expiry in the past", { exp: Math.floor(Date.now() / 1000) - 5 }, {}, "expired"],
    ["no unimatrix scope", { scope: "openid profile" }, {}, "scope"],
    ["a subject linked to nothing", { sub: "stranger" }, {}, "invalid credential"],
  ])(
    "a token with %s is refused with 401 and the challenge on Connect, SSE and /mcp, and UNAUTHENTICATED over gRPC",
    async (_what, claims, options, reason) => {
      const token = await provider.mint({ sub: "person-1", ...claims }, options);
      const connect = await fetch(`${system.url}/${GET_CUBE}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ cubeId: tenant.cubeId }),
      });
      expect(connect.status).toBe(401);
      expect(connect.headers.get("www-authenticate")).toBe(challenge.api);
      const body = (await connect.json()) as { code: string; message: string };
      expect(body.code).toBe("unauthenticated");
      expect(body.message).toContain(reason);
      const sse = await fetch(`${system.url}/v1/cubes/${tenant.cubeId}/events`, {
        headers: { authorization: `Bearer ${token}` },
      });
      await sse.body?.cancel();
      expect(sse.status).toBe(401);
      expect(sse.headers.get("www-authenticate")).toBe(challenge.api);
      expect(await mcpInitialize(token)).toEqual({ status: 401, challenge: challenge.mcp });
      const cube = createClient(CubeService, `127.0.0.1:${system.cube.port}`);
      try {
        await expectStatus(cube.getCube({ cubeId: tenant.cubeId }, asBearer(token)), status.UNAUTHENTICATED);
      } finally {
        cube.close();
      }
    },
  );

  test("no token at all: 401 with the challenge on every surface", async () => {
    const connect = await connectJson(system, GET_CUBE, { cubeId: tenant.cubeId });
    expect(connect.status).toBe(401);
    const raw = await fetch(`${system.url}/${GET_CUBE}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(raw.headers.get("www-authenticate")).toBe(challenge.api);
    const mcp = await fetch(`${system.url}/mcp`, { method: "POST", body: "{}" });
    expect(mcp.status).toBe(401);
    expect(mcp.headers.get("www-authenticate")).toBe(challenge.mcp);
  });

  test("a client-credentials token from the provider calls cube over gRPC as its service account", async () => {
    const token = await provider.clientCredentialsToken();
    const cube = createClient(CubeService, `127.0.0.1:${system.cube.port}`);
    try {
      // The service account (client 1) was granted WRITE on the cube by the seed.
      const answer = await cube.getCube({ cubeId: tenant.cubeId }, asBearer(token));
      expect(answer.cube?.id).toBe(tenant.cubeId);
      const listed = await cube.listCubes({}, asBearer(token));
      expect(listed.cubes.map((c) => c.id)).toEqual([tenant.cubeId]);
    } finally {
      cube.close();
    }
  });

  test("a rotation of the provider's keys is followed without a restart", async () => {
    const before = provider.kid;
    await provider.rotate();
    expect(provider.kid).not.toBe(before);
    const token = await provider.mint({ sub: "person-1" });
    const got = await call<{ cube: { id: string } }>(system, GET_CUBE, { cubeId: tenant.cubeId }, token);
    expect(got.cube.id).toBe(tenant.cubeId);
    // And a client-credentials token the provider now signs with the new key.
    const service = await provider.clientCredentialsToken();
    expect(JSON.parse(Buffer.from(service.split(".")[0]!, "base64url").toString()).kid).toBe(provider.kid);
    expect((await connectJson(system, GET_CUBE, { cubeId: tenant.cubeId }, service)).status).toBe(200);
  });

  test("a token's expiry ends its open stream, and unlinking its subject refuses it at once and ends its streams", async () => {
    const expiring = await provider.mint({ sub: "person-1", exp: Math.floor(Date.now() / 1000) + 3 });
    const opened = sseStream(`${system.url}/v1/cubes/${tenant.cubeId}/events`, expiring);
    try {
      await eventually(async () => opened.ready(), "stream of an expiring token ready", 10_000);
      await eventually(async () => opened.revoked(), "stream ended at the token's expiry", 10_000);
    } finally {
      opened.close();
    }
    expect((await connectJson(system, GET_CUBE, { cubeId: tenant.cubeId }, expiring)).status).toBe(401);

    await call(system, LINK, { subject: "person-2", clientId: tenant.clients[0]!.id }, tenant.user);
    const token = await provider.mint({ sub: "person-2" });
    expect((await connectJson(system, GET_CUBE, { cubeId: tenant.cubeId }, token)).status).toBe(200);
    const stream = sseStream(`${system.url}/v1/cubes/${tenant.cubeId}/events`, token);
    try {
      await eventually(async () => stream.ready(), "stream ready", 10_000);
      const removed = await call<{ removed: boolean }>(system, UNLINK, { subject: "person-2" }, tenant.user);
      expect(removed.removed).toBe(true);
      await eventually(async () => stream.revoked(), "stream ended after unlink", 10_000);
    } finally {
      stream.close();
    }
    expect((await connectJson(system, GET_CUBE, { cubeId: tenant.cubeId }, token)).status).toBe(401);
    expect((await call<{ removed: boolean }>(system, UNLINK, { subject: "person-2" }, tenant.user)).removed).toBe(
      false,
    );
  });

  test("LinkIdentity: another tenant's client is NOT_FOUND, a taken subject ALREADY_EXISTS, a client caller PERMISSION_DENIED", async () => {
    const other = await seedTenant(system, "oidc-other", 1);
    const foreign = await connectJson(
      system,
      LINK,
      { subject: "person-9", clientId: tenant.clients[0]!.id },
      other.user,
    );
    expect([foreign.status, foreign.body.code]).toEqual([404, "not_found"]);
    const taken = await connectJson(
      system,
      LINK,
      { subject: "person-1", clientId: tenant.clients[1]!.id },
      tenant.user,
    );
    expect([taken.status, taken.body.code]).toEqual([409, "already_exists"]);
    const asClient = await connectJson(
      system,
      LINK,
      { subject: "person-9", clientId: tenant.clients[0]!.id },
      tenant.clients[0]!.token,
    );
    expect([asClient.status, asClient.body.code]).toEqual([403, "permission_denied"]);
    const neither = await connectJson(system, LINK, { subject: "person-9" }, tenant.user);
    expect([neither.status, neither.body.code]).toEqual([400, "invalid_argument"]);
    // Another tenant cannot remove this tenant's link: nothing is removed, the subject still works.
    const unlink = await call<{ removed: boolean }>(system, UNLINK, { subject: "person-1" }, other.user);
    expect(unlink.removed).toBe(false);
    const still = await provider.mint({ sub: "person-1" });
    expect((await connectJson(system, GET_CUBE, { cubeId: tenant.cubeId }, still)).status).toBe(200);
  });
});
