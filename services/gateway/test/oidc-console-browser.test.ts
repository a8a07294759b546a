import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { eventually } from "@unimatrix/service-kit/testing";
import type { BrowserContext, Page } from "playwright-core";
import { ARTIFACTS, checkPage, launchChromium } from "./console-browser";
import { CONSOLE_CLIENT, SCOPE, TestProvider } from "./oidc-provider";
import { call, freePort, type System, seedTenant, startSystem } from "./system";

const GATEWAY = resolve(__dirname, "..");

/**
 * A person signs in to the console in Chromium through the provider's own login page (no token
 * pasted), works in it with the session cookie — the cube list over Connect, the live log over
 * SSE — and signs out.
 */
describe("console: signing in through the company's identity provider", () => {
  let provider: TestProvider;
  let system: System;
  let tenant: Awaited<ReturnType<typeof seedTenant>>;
  let browser: BrowserContext;
  let page: Page;
  let profile: string;

  beforeAll(async () => {
    execFileSync(process.execPath, [join(GATEWAY, "scripts", "build-web.mjs")], { stdio: "ignore" });
    mkdirSync(ARTIFACTS, { recursive: true });
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    provider = await TestProvider.start(base);
    const oidc = { oidcIssuer: provider.issuer, oidcAudience: base, oidcScope: SCOPE };
    system = await startSystem(
      "gw_oidc_browser",
      {
        port,
        ...oidc,
        oidcClientId: CONSOLE_CLIENT.id,
        oidcClientSecret: CONSOLE_CLIENT.secret,
        oidcProviderName: "Acme SSO",
      },
      "postgres",
      oidc,
    );
    tenant = await seedTenant(system, "sso", 0);
    const bea = await call<{ user: { id: string } }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueUserToken",
      { displayName: "Bea" },
      tenant.user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/LinkIdentity",
      { subject: "bea", userId: bea.user.id },
      tenant.user,
    );
    profile = mkdtempSync(join(tmpdir(), "umx-oidc-browser-"));
    browser = await launchChromium(profile);
    page = browser.pages()[0] ?? (await browser.newPage());
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await system?.stop();
    await provider?.stop();
  });

  it("signs in through the provider's login page, works with the cookie, and signs out", async () => {
    await page.goto(system.url);
    await page.getByRole("link", { name: "Sign in with Acme SSO" }).waitFor();
    await checkPage(page, "oidc-00-sign-in");
    await page.getByRole("link", { name: "Sign in with Acme SSO" }).click();
    // The provider's own pages: its login form, then its consent.
    await page.waitForURL((url) => url.origin === provider.issuer);
    await page.locator("input[name=login]").fill("bea");
    await page.locator("input[name=password]").fill("any");
    await page.getByRole("button", { name: "Sign-in" }).click();
    await page.getByRole("button", { name: "Continue" }).click();

    // Back in the console, signed in: the tenant's cube, listed over Connect with the cookie.
    await page.getByRole("link", { name: "sso cube", exact: true }).waitFor();
    await page.getByText("signed in through Acme SSO").waitFor();
    await checkPage(page, "oidc-01-signed-in");
    const cookies = new Map((await browser.cookies(system.url)).map((c) => [c.name, c]));
    expect(cookies.get("umx_session")).toMatchObject({ httpOnly: true, secure: true, sameSite: "Lax" });
    expect(cookies.get("umx_csrf")).toMatchObject({ httpOnly: false, secure: true, sameSite: "Lax" });
    // Nothing of the credential is in the page's storage.
    expect(await page.evaluate(() => JSON.stringify(sessionStorage))).not.toContain("eyJ");
    expect(await page.evaluate(() => document.cookie)).not.toContain("umx_session");

    // The live log streams over SSE with the cookie.
    await page.getByRole("link", { name: "sso cube", exact: true }).click();
    await page.locator("#stream-status[data-state=live]").waitFor();

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("link", { name: "Sign in with Acme SSO" }).waitFor();
    await eventually(
      async () => !(await browser.cookies(system.url)).some((c) => c.name === "umx_session"),
      "session cookie cleared",
      10_000,
    );
    await page.reload();
    await page.getByRole("link", { name: "Sign in with Acme SSO" }).waitFor();
    expect(await page.getByText("signed in through Acme SSO").count()).toBe(0);
  });
});
