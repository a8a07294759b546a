import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { eventually } from "@unimatrix/service-kit/testing";
import type { BrowserContext, Page } from "playwright-core";
import { ARTIFACTS, checkPage, launchChromium } from "./console-browser";
import { call, type System, seedTenant, startSystem } from "./system";

const GATEWAY = resolve(__dirname, "..");

/** A team admin registers and revokes machines, enrolls and revokes devices, and reads the audit log. */
describe("console: machines, devices and the audit log", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let browser: BrowserContext;
  let page: Page;
  let profile: string;

  beforeAll(async () => {
    execFileSync(process.execPath, [join(GATEWAY, "scripts", "build-web.mjs")], { stdio: "ignore" });
    mkdirSync(ARTIFACTS, { recursive: true });
    system = await startSystem("gw_console_devices");
    acme = await seedTenant(system, "acme", 0);
    profile = mkdtempSync(join(tmpdir(), "umx-console-devices-"));
    browser = await launchChromium(profile);
    page = browser.pages()[0] ?? (await browser.newPage());
    await page.goto(system.url);
    await page.getByLabel("Access token").fill(acme.user);
    await page.keyboard.press("Enter");
    await page.getByRole("link", { name: "acme cube", exact: true }).waitFor();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await system?.stop();
  });

  it("registers a machine (token once) that links with it, and revokes it", async () => {
    await page.getByRole("link", { name: "Machines" }).click();
    const register = page.getByRole("region", { name: "Register a machine" });
    await register.getByLabel("Machine name").fill("build-01");
    await register.getByRole("button", { name: "Register machine" }).click();
    const token = await register
      .getByRole("region", { name: "Machine build-01 registered" })
      .getByLabel("Token")
      .inputValue();
    expect(token).toMatch(/^umx_machine_/);
    const machines = createClient(LinkService, `127.0.0.1:${system.presence.port}`);
    const link = machines.link({ metadata: { authorization: `Bearer ${token}` } });
    link.call.on("error", () => {});
    link.send({ event: { case: "hello", value: { agentVersion: "test", hostname: "build-01" } } });
    const row = page.locator("tr[data-machine-id]", { hasText: "build-01" });
    await page.locator("tr[data-machine-id][data-state=linked]", { hasText: "build-01" }).waitFor();
    await checkPage(page, "admin-07-machines");
    await row.getByRole("button", { name: "Revoke build-01" }).click();
    await row.getByRole("button", { name: "Confirm revocation" }).click();
    await page.locator("tr[data-machine-id][data-state=revoked]", { hasText: "build-01" }).waitFor();
    // Revocation closes the machine's link and its token stops authenticating.
    await eventually(async () => {
      const { machines: list } = await call<{ machines: { name: string; linked?: boolean; revokedAt?: string }[] }>(
        system,
        "unimatrix.presence.v1.MachineService/ListMachines",
        { includeRevoked: true },
        acme.user,
      );
      return list.some((m) => m.name === "build-01" && m.revokedAt !== undefined && !m.linked);
    }, "the machine to be revoked and unlinked");
    link.cancel();
    machines.close();
  });

  it("issues an enroll token (TTL, label), revokes a device with a reason, and filters the audit log", async () => {
    await page.getByRole("link", { name: "Devices" }).click();
    const enroll = page.getByRole("region", { name: "Enroll a device" });
    await enroll.getByLabel("Valid for").selectOption("600");
    await enroll.getByLabel("Label").fill("laptop");
    await enroll.getByRole("button", { name: "Issue enroll token" }).click();
    const token = await enroll
      .getByRole("region", { name: "Enroll token for laptop" })
      .getByLabel("Token")
      .inputValue();
    const listed = enroll.locator("li[data-enroll-token-id]", { hasText: "laptop" });
    await listed.waitFor();
    const { enrollTokens } = await call<{ enrollTokens: { label: string; createdAt: string; expiresAt: string }[] }>(
      system,
      "unimatrix.device.v1.EnrollmentService/ListEnrollTokens",
      {},
      acme.user,
    );
    const issued = enrollTokens.find((t) => t.label === "laptop")!;
    expect(Date.parse(issued.expiresAt) - Date.parse(issued.createdAt)).toBe(600_000);
    await enroll.getByLabel("Label").fill("spare");
    await enroll.getByRole("button", { name: "Issue enroll token" }).click();
    await enroll
      .locator("li[data-enroll-token-id]", { hasText: "spare" })
      .getByRole("button", { name: /^Revoke/ })
      .click();
    await enroll.locator("li[data-enroll-token-id]", { hasText: "spare" }).waitFor({ state: "detached" });

    const enrolled = await call<{ device: { id: string } }>(system, "unimatrix.device.v1.DeviceService/EnrollDevice", {
      enrollToken: token,
      publicKey: "cHVibGljLWtleS1vZi1sYXB0b3AtOQ==",
      platform: "DEVICE_PLATFORM_LINUX",
      displayName: "laptop-9",
    });
    await page.getByRole("link", { name: "Cubes" }).click();
    await page.getByRole("link", { name: "Devices" }).click();
    const row = page.locator(`tr[data-device-id="${enrolled.device.id}"]`);
    await row.getByRole("button", { name: "Revoke laptop-9" }).click();
    const revoke = row.getByRole("form", { name: "Revoke laptop-9" });
    await revoke.getByRole("button", { name: "Revoke device" }).click();
    await revoke.getByText("is required", { exact: true }).waitFor();
    await checkPage(page, "admin-08-devices");
    await revoke.getByLabel("Reason", { exact: true }).fill("laptop lost on a train");
    await revoke.getByRole("button", { name: "Revoke device" }).click();
    await row.locator(".reason", { hasText: "laptop lost on a train" }).waitFor();
    expect(await row.locator(".badge").textContent()).toBe("revoked");

    await page.getByRole("link", { name: "Audit" }).click();
    const audit = page.getByRole("region", { name: "Audit log" });
    await audit.locator("tr[data-type=AUDIT_EVENT_TYPE_DEVICE_REVOKED]").waitFor();
    const types = () => audit.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-type")));
    expect(await types()).toEqual([
      "AUDIT_EVENT_TYPE_DEVICE_REVOKED",
      "AUDIT_EVENT_TYPE_DEVICE_ENROLLED",
      "AUDIT_EVENT_TYPE_ENROLL_TOKEN_REVOKED",
      "AUDIT_EVENT_TYPE_ENROLL_TOKEN_ISSUED",
      "AUDIT_EVENT_TYPE_ENROLL_TOKEN_ISSUED",
    ]);
    await audit.getByLabel("enroll token issued").check();
    await audit.getByLabel("Device", { exact: true }).selectOption({ label: "laptop-9" });
    await audit.getByRole("button", { name: "Apply filters" }).click();
    await audit.getByText("0 events").waitFor();
    await audit.getByLabel("enroll token issued").uncheck();
    await audit.getByLabel("device revoked").check();
    await audit.getByRole("button", { name: "Apply filters" }).click();
    await audit.getByText("1 event", { exact: true }).waitFor();
    expect(await types()).toEqual(["AUDIT_EVENT_TYPE_DEVICE_REVOKED"]);
    // An upper bound before the lower one: the device service names `end_time`, shown at "Until".
    await audit.getByLabel("From").fill("2026-01-02T00:00:00");
    await audit.getByLabel("Until").fill("2026-01-01T00:00:00");
    await audit.getByRole("button", { name: "Apply filters" }).click();
    await audit.getByText("must not be before start_time").waitFor();
    expect(await audit.getByLabel("Until").getAttribute("aria-invalid")).toBe("true");
    await checkPage(page, "admin-09-audit");
  });
});
