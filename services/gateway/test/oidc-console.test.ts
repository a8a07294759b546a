import { TEST_DATABASE_URL } from "@unimatrix/service-kit/testing";
import pg from "pg";
import { CONSOLE_CLIENT, SCOPE, signInThroughPages, TestProvider } from "./oidc-provider";
import { addGateway, call, freePort, type System, seedTenant, startSystem } from "./system";

// People sign in to the console through the provider: authorization code + PKCE from the gateway,
// the provider's own login page, an HttpOnly session cookie whose calls need the CSRF header.

const LIST_CUBES = "unimatrix.cube.v1.CubeService/ListCubes";

/** The Set-Cookie lines of a response, by cookie name. */
function setCookies(response: Response): Map<string, string> {
  return new Map(response.headers.getSetCookie().map((line) => [line.slice(0, line.indexOf("=")), line]));
}

/** `name=value` of a Set-Cookie line. */
function pair(line: string): string {
  return line.split(";")[0]!;
}

describe("people sign in to the console through the company's identity provider", () => {
  let provider: TestProvider;
  let system: System;
  let tenant: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    provider = await TestProvider.start(base);
    const oidc = { oidcIssuer: provider.issuer, oidcAudience: base, oidcScope: SCOPE };
    system = await startSystem(
      "gw_oidc_console",
      {
        port,
        ...oidc,
        oidcClientId: CONSOLE_CLIENT.id,
        oidcClientSecret: CONSOLE_CLIENT.secret,
        oidcProviderName: "Acme SSO",
      },
      "postgres",
      // People in the group umx-users who are linked to nothing join this tenant on first sign-in.
      { ...oidc, provisionTenant: "oidc-console", roleClaim: "groups", userGroups: ["umx-users"] },
    );
    tenant = await seedTenant(system, "oidc-console", 1);
    const alice = await call<{ user: { id: string } }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueUserToken",
      { displayName: "Alice" },
      tenant.user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/LinkIdentity",
      { subject: "alice", userId: alice.user.id },
      tenant.user,
    );
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
    await provider?.stop();
  });

  /** Signs `login` in through the gateway's routes and the provider's pages; the callback's answer. */
  async function signIn(login: string): Promise<Response> {
    const start = await fetch(`${system.url}/auth/oidc/login`, { redirect: "manual" });
    expect(start.status).toBe(302);
    const attempt = setCookies(start).get("umx_oidc")!;
    expect(attempt).toMatch(/HttpOnly/);
    expect(attempt).toMatch(/Secure/);
    expect(attempt).toMatch(/SameSite=Lax/);
    const authorization = new URL(start.headers.get("location")!);
    expect(authorization.origin).toBe(provider.issuer);
    expect(authorization.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorization.searchParams.get("client_id")).toBe(CONSOLE_CLIENT.id);
    const back = await signInThroughPages(authorization.href, login);
    expect(back.pathname).toBe("/auth/oidc/callback");
    return fetch(back, { redirect: "manual", headers: { cookie: pair(attempt) } });
  }

  test("the console is told which provider to offer, and no session is open yet", async () => {
    const response = await fetch(`${system.url}/auth/session`);
    expect(await response.json()).toEqual({ provider: { name: "Acme SSO" }, signedIn: false });
  });

  test("a linked person signs in: an HttpOnly Secure SameSite session whose calls need the CSRF header; sign-out ends it", async () => {
    const callback = await signIn("alice");
    expect(callback.status).toBe(302);
    expect(callback.headers.get("location")).toBe("/#/cubes");
    const cookies = setCookies(callback);
    const session = cookies.get("umx_session")!;
    const csrf = cookies.get("umx_csrf")!;
    expect(session).toMatch(/HttpOnly/);
    expect(session).toMatch(/Secure/);
    expect(session).toMatch(/SameSite=Lax/);
    expect(csrf).not.toMatch(/HttpOnly/);
    const cookie = `${pair(session)}; ${pair(csrf)}`;
    const csrfToken = pair(csrf).split("=")[1]!;

    const listed = async (headers: Record<string, string>) => {
      const response = await fetch(`${system.url}/${LIST_CUBES}`, {
        method: "POST",
        headers: { "content-type": "application/json", cookie, ...headers },
        body: "{}",
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const ok = await listed({ "x-umx-csrf": csrfToken });
    expect(ok.status).toBe(200);
    expect((ok.body.cubes as { id: string }[]).map((c) => c.id)).toEqual([tenant.cubeId]);
    // The cookie alone (a cross-site form or script) is refused, as is a wrong token.
    expect(await listed({})).toMatchObject({ status: 403, body: { code: "permission_denied" } });
    expect((await listed({ "x-umx-csrf": "x".repeat(csrfToken.length) })).status).toBe(403);
    expect((await fetch(`${system.url}/auth/session`, { headers: { cookie } }).then((r) => r.json())).signedIn).toBe(
      true,
    );
    // No session store: another gateway replica serves the same cookie.
    const second = await addGateway(system, {
      oidcIssuer: provider.issuer,
      oidcAudience: system.url,
      oidcScope: SCOPE,
      oidcClientId: CONSOLE_CLIENT.id,
    });
    try {
      const elsewhere = await fetch(`${second.url}/${LIST_CUBES}`, {
        method: "POST",
        headers: { "content-type": "application/json", cookie, "x-umx-csrf": csrfToken },
        body: "{}",
      });
      expect(elsewhere.status).toBe(200);
    } finally {
      await second.stop();
    }

    // Sign-out needs the CSRF header too, and clears both cookies.
    const refused = await fetch(`${system.url}/auth/logout`, { method: "POST", headers: { cookie } });
    expect(refused.status).toBe(403);
    const out = await fetch(`${system.url}/auth/logout`, {
      method: "POST",
      headers: { cookie, "x-umx-csrf": csrfToken },
    });
    expect(out.status).toBe(200);
    const cleared = setCookies(out);
    expect(cleared.get("umx_session")).toMatch(/^umx_session=;.*Max-Age=0/);
    expect(cleared.get("umx_csrf")).toMatch(/^umx_csrf=;.*Max-Age=0/);
  });

  test("a person linked to nothing but in a mapped group becomes a user of the tenant on first sign-in, once", async () => {
    for (let round = 0; round < 2; round++) {
      const callback = await signIn("carol");
      expect(callback.status).toBe(302);
      const cookies = setCookies(callback);
      const csrf = pair(cookies.get("umx_csrf")!);
      const response = await fetch(`${system.url}/${LIST_CUBES}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          cookie: `${pair(cookies.get("umx_session")!)}; ${csrf}`,
          "x-umx-csrf": csrf.split("=")[1]!,
        },
        body: "{}",
      });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { cubes: { id: string }[] };
      expect(body.cubes.map((c) => c.id)).toEqual([tenant.cubeId]);
    }
    const db = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await db.connect();
    try {
      const { rows } = await db.query(
        `SELECT u.tenant_id::text, u.display_name FROM "${system.cubeSchema}".external_identities e
         JOIN "${system.cubeSchema}".users u ON u.id = e.user_id WHERE e.subject = 'carol'`,
      );
      // One user, named from the ID token, in the provisioning tenant: the second sign-in found it.
      expect(rows).toEqual([{ tenant_id: tenant.tenantId, display_name: "Person carol" }]);
    } finally {
      await db.end();
    }
  });

  test("a person linked to nothing and in no mapped group is turned away at the callback with no session", async () => {
    const callback = await signIn("mallory");
    expect(callback.status).toBe(403);
    expect(setCookies(callback).has("umx_session")).toBe(false);
    expect(await callback.text()).toContain("not linked to a Unimatrix user");
  });

  test("a callback without its attempt cookie is refused, with no session", async () => {
    const start = await fetch(`${system.url}/auth/oidc/login`, { redirect: "manual" });
    const back = await signInThroughPages(start.headers.get("location")!, "alice");
    const noCookie = await fetch(back, { redirect: "manual" });
    expect(noCookie.status).toBe(400);
    expect(setCookies(noCookie).has("umx_session")).toBe(false);
  });
});
