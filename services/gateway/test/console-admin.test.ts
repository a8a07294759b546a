import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { ARTIFACTS, checkPage, launchChromium, mcpAgent, tabTo } from "./console-browser";
import { call, type System, seedTenant, startSystem } from "./system";

const GATEWAY = resolve(__dirname, "..");
const CUBE = "unimatrix.cube.v1.CubeService";
const IDENTITY = "unimatrix.cube.v1.IdentityService";

/**
 * A team admin runs a tenant in the console, from what `npm run bootstrap` leaves (a tenant, its
 * admin's user token, a cube with a worker role): a cube with a taxonomy, a queen role and worker
 * roles, clients with grants (a read-only observer among them), tokens pasted into MCP agents,
 * a rotation and an eviction the agents feel at once. (Machines, devices and the audit log:
 * console-devices.test.ts.)
 */
describe("console: running a tenant", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let browser: BrowserContext;
  let page: Page;
  let profile: string;
  let cubeId: string;
  const tokens = new Map<string, string>();
  const closers: (() => Promise<unknown>)[] = [];
  const clientItem = (name: string) =>
    page.locator("li[data-client-id]").filter({ has: page.getByRole("heading", { name, exact: true }) });

  beforeAll(async () => {
    execFileSync(process.execPath, [join(GATEWAY, "scripts", "build-web.mjs")], { stdio: "ignore" });
    mkdirSync(ARTIFACTS, { recursive: true });
    // No auth cache: a rotated or revoked credential is refused on the very next call (by default
    // the gateway may keep honouring it for up to GATEWAY_AUTH_CACHE_MS, at most 5 s).
    system = await startSystem("gw_console_admin", { authCacheMs: 0 });
    acme = await seedTenant(system, "acme", 0);
    profile = mkdtempSync(join(tmpdir(), "umx-console-admin-"));
    browser = await launchChromium(profile);
    await browser.grantPermissions(["clipboard-read", "clipboard-write"], { origin: system.url });
    page = browser.pages()[0] ?? (await browser.newPage());
  }, 120_000);

  afterAll(async () => {
    for (const close of closers) await close();
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await system?.stop();
  });

  it("signs in and creates a cube, showing the taxonomy contract's messages as the admin types", async () => {
    await page.goto(system.url);
    await checkPage(page, "admin-01-sign-in");
    await page.getByLabel("Access token").fill(acme.user);
    await page.keyboard.press("Enter");
    await page.getByRole("link", { name: "acme cube", exact: true }).waitFor();
    // The whole session runs in this one document: a full reload would drop this marker.
    await page.evaluate(() => {
      (window as unknown as { marker: number }).marker = 42;
    });

    const create = page.getByRole("region", { name: "Create a cube" });
    const taxonomy = create.getByLabel("Message taxonomy (JSON)");
    await create.getByLabel("Name").fill("release train");
    await create.getByLabel("Directive").fill("Ship every Thursday.");
    await taxonomy.fill('{"kinds": ["status",');
    await create.getByText(/^must be valid JSON/).waitFor();
    expect(await taxonomy.getAttribute("aria-invalid")).toBe("true");
    await taxonomy.fill('["status"]');
    await create.getByText("must be a JSON object", { exact: true }).waitFor();
    await create.getByRole("button", { name: "Create cube" }).click();
    expect(await page.locator(".cube-list li").count()).toBe(1);
    await taxonomy.fill('{"kinds": ["status", "blocker"]}');
    // The form checks on every input event: the fill has run it.
    expect(await create.locator(".field-error:not(:empty)").count()).toBe(0);

    const focus = await tabTo(page, "button.primary[type=submit]:not([disabled])");
    expect(focus.outlineStyle).toBe("solid");
    expect(focus.outlineWidth).toBe("3px");
    await page.keyboard.press("Enter");
    const link = page.getByRole("link", { name: "release train", exact: true });
    await link.waitFor();
    cubeId = (await page.locator(".cube-list li", { has: link }).getAttribute("data-cube-id")) as string;
    const { cube } = await call<{ cube: { directive: string; taxonomyJson: string; taxonomyKinds: string[] } }>(
      system,
      `${CUBE}/GetCube`,
      { cubeId },
      acme.user,
    );
    expect(cube).toMatchObject({
      directive: "Ship every Thursday.",
      taxonomyJson: '{"kinds": ["status", "blocker"]}',
      taxonomyKinds: ["status", "blocker"],
    });
    await checkPage(page, "admin-02-cubes");
  });

  it("edits the directive, makes a queen and worker roles with their flags, and edits a section", async () => {
    await page.getByRole("link", { name: "Manage release train" }).click();
    await page.getByRole("heading", { name: "Manage release train" }).waitFor();
    const settings = page.getByRole("region", { name: "Directive and taxonomy" });
    // The kinds as the cube service read the saved taxonomy (the console parses none itself).
    await settings.getByText("Kinds: status, blocker", { exact: true }).waitFor();
    await settings.getByLabel("Directive", { exact: true }).fill("Ship every Thursday. Queen assigns.");
    await settings.getByRole("button", { name: "Save directive and taxonomy" }).click();
    await settings.getByText("Saved", { exact: true }).waitFor();

    const roles = page.getByRole("region", { name: /^Roles/ });
    const newRole = async (name: string, queen: boolean, flags: string[], description = "") => {
      const summary = roles.getByText("New role", { exact: true });
      if ((await roles.locator("details.new-role[open]").count()) === 0) await summary.click();
      const form = roles.getByRole("form", { name: "New role" });
      await form.getByLabel("Role name").fill(name);
      await form.getByLabel("Class").selectOption(queen ? "ROLE_CLASS_QUEEN" : "ROLE_CLASS_WORKER");
      for (const flag of flags) await form.getByLabel(flag, { exact: true }).check();
      if (description) await form.getByLabel("Detailed description (Markdown)").fill(description);
      await form.getByRole("button", { name: "Create role" }).click();
    };
    await newRole("queen", true, ["Receives all direct entries", "Mandatory"], "## Duties\nAssign work.");
    await roles.locator("li[data-role-id]", { hasText: "queen" }).waitFor();
    // The flags are explained where they are set.
    await roles.getByText("New role", { exact: true }).click();
    await roles.getByText(/see every direct entry in the cube, whoever it is addressed to/).waitFor();
    await newRole("builder", false, ["Default role"]);
    await roles.locator("li[data-role-id]", { hasText: "builder" }).waitFor();
    // A taken name: the API's refusal shows next to the name.
    await newRole("queen", false, []);
    await roles.getByRole("form", { name: "New role" }).getByText("a role with that name exists in the cube").waitFor();

    const builder = roles.locator("li[data-role-id]", { hasText: "builder" });
    await builder.getByRole("button", { name: "Edit builder" }).click();
    await builder.getByLabel("Short description").fill("Builds and ships");
    await builder.getByRole("button", { name: "Save role" }).click();
    await builder.getByText("Builds and ships").waitFor();
    await builder.getByRole("button", { name: "Edit builder" }).click();
    await builder.getByText("Edit one section").click();
    const sections = builder.getByRole("form", { name: "Sections of builder" });
    await sections.getByRole("button", { name: "Apply" }).click();
    // An empty heading: the cube service names `section`, and the console shows it right there.
    const heading = sections.getByLabel("Section heading");
    await page.waitForFunction(() => document.querySelector("[data-field=section][aria-invalid=true]") !== null);
    expect(await sections.locator(".field-error:not(:empty)").count()).toBe(1);
    await heading.fill("Checks");
    await sections.getByLabel("Section text").fill("Run the tests before posting.");
    await sections.getByRole("button", { name: "Apply" }).click();
    await sections.waitFor({ state: "detached" });

    const { roles: stored } = await call<{ roles: Record<string, unknown>[] }>(
      system,
      `${CUBE}/ListRoles`,
      { cubeId },
      acme.user,
    );
    const byName = Object.fromEntries(stored.map((r) => [r.name, r]));
    expect(byName.queen).toMatchObject({
      roleClass: "ROLE_CLASS_QUEEN",
      receivesAllDirect: true,
      mandatory: true,
      canBroadcast: true,
    });
    expect(byName.builder).toMatchObject({
      isDefault: true,
      shortDescription: "Builds and ships",
      detailedDescription: expect.stringContaining("## Checks\nRun the tests before posting."),
    });
    expect(stored).toHaveLength(2);
    await checkPage(page, "admin-03-manage");
  });

  it("issues clients (token once, copy button, MCP settings), grants them, and an observer is read-only", async () => {
    await page.getByRole("link", { name: "Clients" }).click();
    const issue = page.getByRole("region", { name: "Issue a client" });
    for (const name of ["queen-host", "builder-a", "builder-b", "observer"]) {
      await issue.getByLabel("Client name").fill(name);
      await issue.getByRole("button", { name: "Issue client" }).click();
      const secret = issue.getByRole("region", { name: `Client ${name} issued` });
      const token = await secret.getByLabel("Token").inputValue();
      expect(token).toMatch(/^umx_client_/);
      await secret.getByRole("button", { name: "Copy token" }).click();
      await secret.getByText("Copied").waitFor();
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(token);
      const settings = JSON.parse(await secret.getByLabel("MCP settings").inputValue());
      expect(settings.mcpServers.unimatrix).toEqual({
        type: "http",
        url: `${system.url}/mcp`,
        headers: { Authorization: `Bearer ${token}` },
      });
      tokens.set(name, token);
      const grants = clientItem(name).locator(`tr[data-cube-id="${cubeId}"]`);
      await grants
        .getByLabel("release train")
        .selectOption(name === "observer" ? "CUBE_ACCESS_READ" : "CUBE_ACCESS_WRITE");
      await grants.getByRole("button", { name: `Set access of ${name} to release train` }).click();
      await page.locator("#announcer", { hasText: `${name}: ` }).waitFor();
    }
    await issue.getByLabel("Client name").fill("observer");
    await issue.getByRole("button", { name: "Issue client" }).click();
    await issue.getByText("an active client with that name exists").waitFor();
    expect(await issue.getByLabel("Client name").getAttribute("aria-invalid")).toBe("true");
    await checkPage(page, "admin-04-clients");

    const { grants } = await call<{ grants: { access: string }[] }>(
      system,
      `${IDENTITY}/ListCubeGrants`,
      { cubeId },
      acme.user,
    );
    expect(grants.map((g) => g.access).sort()).toEqual([
      "CUBE_ACCESS_READ",
      "CUBE_ACCESS_WRITE",
      "CUBE_ACCESS_WRITE",
      "CUBE_ACCESS_WRITE",
    ]);
  });

  it("an agent pastes the token, attaches and posts, live in the console; rotating ends its session at once", async () => {
    await page.getByRole("link", { name: "Cubes" }).click();
    await page.getByRole("link", { name: "Manage release train" }).click();
    const roleId = (name: string) =>
      page
        .locator(`li[data-role-id]`)
        .filter({ has: page.getByText(name, { exact: true }) })
        .first()
        .getAttribute("data-role-id");
    const queenRole = (await roleId("queen")) as string;
    const queen = await mcpAgent(system.url, tokens.get("queen-host")!);
    closers.push(queen.close);
    // The compact seat_attach (issue 15) names the role in the text a model reads.
    const seat = await queen.result("seat_attach", { cube_id: cubeId, role_id: queenRole });
    expect(seat.text).toMatch(/^Seat created: you are queen-1 \(role queen\) in release train\./);
    const observer = await mcpAgent(system.url, tokens.get("observer")!);
    closers.push(observer.close);
    await observer.tool("seat_attach", { cube_id: cubeId, role_id: (await roleId("builder")) as string });
    await expect(observer.tool("log_post", { message: "can I?" })).rejects.toThrow(/log_post/);

    await page.getByRole("link", { name: "Open the cube" }).click();
    await page.locator("#stream-status[data-state=live]").waitFor();
    const posted = await queen.tool("log_post", { message: "builders: take one ticket each", kind: "status" });
    await page
      .locator(`li[data-entry-id="${posted.id as string}"]`)
      .getByText("builders: take one ticket each")
      .waitFor();
    await checkPage(page, "admin-05-cube-live");

    await page.getByRole("link", { name: "Clients" }).click();
    const item = clientItem("queen-host");
    await item.getByRole("button", { name: "Rotate credential of queen-host" }).click();
    await item.getByText(/every drone session it opened ends/).waitFor();
    await item.getByRole("button", { name: "Confirm rotation" }).click();
    const secret = page.getByRole("region", { name: "New token for queen-host" });
    await secret.getByText(/The old token no longer works; 1 drone session ended/).waitFor();
    const rotated = await secret.getByLabel("Token").inputValue();
    expect(rotated).not.toBe(tokens.get("queen-host"));
    await expect(queen.tool("log_post", { message: "still here?" })).rejects.toThrow();

    // The new token, pasted into a fresh MCP session, works.
    const again = await mcpAgent(system.url, rotated);
    closers.push(again.close);
    await again.tool("seat_attach", { cube_id: cubeId, role_id: queenRole });
    await again.tool("log_post", { message: "back with the new token" });
    tokens.set("queen-host", rotated);
  });

  it("shows each drone's sessions' state, evicts a drone (its agent is refused), and revokes a client", async () => {
    const builder = await mcpAgent(system.url, tokens.get("builder-a")!);
    closers.push(builder.close);
    await page.getByRole("link", { name: "Cubes" }).click();
    await page.getByRole("link", { name: "Manage release train" }).click();
    const builderRole = await page
      .locator("li[data-role-id]")
      .filter({ has: page.getByText("builder", { exact: true }) })
      .getAttribute("data-role-id");
    const seat = await builder.tool("seat_attach", { cube_id: cubeId, role_id: builderRole });
    await page.getByRole("button", { name: "Refresh seats" }).click();
    const seats = page.getByRole("region", { name: /^Seats/ });
    const row = (id: string) => seats.locator(`tr[data-drone-id="${id}"]`);
    await row(seat.drone_id as string).waitFor();
    // label : client : posture : sessions (why)
    const states = await seats.locator("tr[data-drone-id]").evaluateAll((rows) =>
      rows.map((r) => {
        const cells = [...r.querySelectorAll("td")];
        const why = cells[2]?.querySelector(".muted")?.textContent;
        return `${r.querySelector("th")?.firstChild?.textContent}:${cells[0]?.textContent}:${cells[1]?.textContent}:${r.getAttribute("data-session-state")} (${why})`;
      }),
    );
    expect(states.sort()).toEqual([
      "builder-1:observer:observer:live (a session is open)",
      "builder-2:builder-a:participant:live (a session is open)",
      "queen-1:queen-host:participant:revoked (credential rotated)",
      "queen-2:queen-host:participant:live (a session is open)",
    ]);
    await row(seat.drone_id as string)
      .getByRole("button", { name: "Evict builder-2" })
      .focus();
    // From the keyboard: Enter on Evict, and the confirmation that appears has the focus.
    await page.keyboard.press("Enter");
    await row(seat.drone_id as string)
      .getByText("Its sessions end now.", { exact: false })
      .waitFor();
    await checkPage(page, "admin-06-seats");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Confirm eviction");
    await page.keyboard.press("Enter");
    await seats
      .locator(`tr[data-drone-id="${seat.drone_id as string}"][data-session-state=revoked]`)
      .getByText("evicted", { exact: true })
      .waitFor();
    await expect(builder.tool("log_post", { message: "evicted?" })).rejects.toThrow();

    await page.getByRole("link", { name: "Clients" }).click();
    const observer = clientItem("observer");
    await observer.getByRole("button", { name: "Revoke observer" }).click();
    await observer.getByRole("button", { name: "Confirm revocation" }).click();
    await observer.getByText("revoked", { exact: true }).waitFor();
    const { clients } = await call<{ clients: { name: string; revokedAt?: string }[] }>(
      system,
      `${IDENTITY}/ListClients`,
      { includeRevoked: true },
      acme.user,
    );
    expect(clients.filter((c) => c.revokedAt).map((c) => c.name)).toEqual(["observer"]);
    // Every step ran in the one document the admin signed in to: no full reload.
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
  });
});
