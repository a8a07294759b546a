import { SCOPE, TestProvider } from "./oidc-provider";
import { call, connectJson, freePort, type System, seedTenant, startSystem } from "./system";

// The embedded store (PGlite) reports a unique violation its own way: a taken subject is
// ALREADY_EXISTS there too, and a provider token acts as its linked client.

const LINK = "unimatrix.cube.v1.IdentityService/LinkIdentity";

describe("provider identities on the embedded store", () => {
  let provider: TestProvider;
  let system: System;
  let tenant: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    provider = await TestProvider.start(base);
    const oidc = { oidcIssuer: provider.issuer, oidcAudience: base, oidcScope: SCOPE };
    system = await startSystem("gw_oidc_embedded", { port, ...oidc }, "embedded", oidc);
    tenant = await seedTenant(system, "oidc-embedded", 2);
  }, 180_000);
  afterAll(async () => {
    await system?.stop();
    await provider?.stop();
  });

  test("a taken subject is ALREADY_EXISTS and the linked one acts as its client", async () => {
    await call(system, LINK, { subject: "person-1", clientId: tenant.clients[0]!.id }, tenant.user);
    const taken = await connectJson(
      system,
      LINK,
      { subject: "person-1", clientId: tenant.clients[1]!.id },
      tenant.user,
    );
    expect([taken.status, taken.body.code]).toEqual([409, "already_exists"]);
    const token = await provider.mint({ sub: "person-1" });
    const listed = await call<{ clients: { id: string }[] }>(
      system,
      "unimatrix.cube.v1.IdentityService/ListClients",
      {},
      token,
    );
    expect(listed.clients.map((c) => c.id)).toEqual([tenant.clients[0]!.id]);
  });
});
