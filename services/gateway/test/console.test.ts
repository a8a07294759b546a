import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { RunningCube } from "@unimatrix/cube";
import { type RunningGateway, startGateway } from "@unimatrix/gateway";
import { readConfig } from "@unimatrix/service-kit/config";
import { createClient } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { eventually, TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { gatewayEnv } from "../src/config";
import { call, type System, seedTenant, startSystem } from "./system";

const GATEWAY = resolve(__dirname, "..");
const ARTIFACTS = resolve(__dirname, "../../../test-artifacts/console");
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A push: an item's text line (`#41 operator-1 → all: …`), or a notice about the stream. */
type Pushed = string | { readonly event: string };

/** An agent on MCP (the SDK client over streamable HTTP), remembering what was pushed to it. */
async function mcpAgent(url: string, token: string) {
  const client = new Client({ name: "console-test-agent", version: "1.0.0" });
  const pushed: Pushed[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    pushed.push(notification.params.data as Pushed);
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  const tool = async (name: string, args: Record<string, unknown> = {}) => {
    const result = (await client.callTool({ name, arguments: args })) as {
      isError?: boolean;
      structuredContent?: Record<string, unknown>;
      content: { text: string }[];
    };
    if (result.isError) throw new Error(`${name}: ${result.content[0]?.text}`);
    return result.structuredContent ?? {};
  };
  return { pushed, tool, close: () => client.close() };
}

describe("gateway: web console", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let browser: BrowserContext;
  let page: Page;
  let profile: string;
  let restarted: RunningGateway | undefined;
  let poster: { sessionToken: string; drone: { id: string } };
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    execFileSync(process.execPath, [join(GATEWAY, "scripts", "build-web.mjs")], { stdio: "ignore" });
    mkdirSync(ARTIFACTS, { recursive: true });
    system = await startSystem("gw_console");
    acme = await seedTenant(system, "acme", 3);
    await call(
      system,
      "unimatrix.cube.v1.CubeService/CreateRole",
      { cubeId: acme.cubeId, name: "operator", humanSeat: true, canBroadcast: true, shortDescription: "A person" },
      acme.user,
    );
    profile = mkdtempSync(join(tmpdir(), "umx-console-chromium-"));
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: "/usr/bin/chromium",
      args: CHROMIUM_ARGS,
      headless: true,
      viewport: { width: 1280, height: 860 },
    });
    page = browser.pages()[0] ?? (await browser.newPage());
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await restarted?.stop();
    await system?.stop();
  });

  it("serves the console at / with its security headers, and nothing outside its folder", async () => {
    const index = await fetch(`${system.url}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(index.headers.get("cache-control")).toBe("no-cache");
    expect(index.headers.get("content-security-policy")).toContain("connect-src 'self'");
    expect(index.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await index.text();
    const script = /src="(\/assets\/app-[0-9a-f]{12}\.js)"/.exec(html)?.[1];
    const style = /href="(\/assets\/styles-[0-9a-f]{12}\.css)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    expect(style).toBeDefined();
    const js = await fetch(`${system.url}${script}`);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.headers.get("cache-control")).toContain("immutable");
    expect((await fetch(`${system.url}${style}`)).headers.get("content-type")).toBe("text/css; charset=utf-8");

    const head = await fetch(`${system.url}/index.html`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get("content-length"))).toBe(Buffer.byteLength(html));
    expect((await fetch(`${system.url}/assets/nope.js`)).status).toBe(404);
    expect((await fetch(`${system.url}/assets/%2e%2e/%2e%2e/package.json`)).status).toBe(404);
    expect((await fetch(`${system.url}/assets/..%2f..%2fsrc%2fstatic.ts`)).status).toBe(404);
    expect((await fetch(`${system.url}/`, { method: "DELETE" })).status).toBe(405);
  });

  it("signs in, shows an agent's post live, posts, acks and claims as a human seat, and the agent receives it", async () => {
    const consoleClient = acme.clients[1]!;
    await page.goto(system.url);
    await page.getByLabel("Access token").fill("not-a-token");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("That is not a user or client token").waitFor();
    await page.getByLabel("Access token").fill(consoleClient.token);
    await shot("01-sign-in");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("link", { name: "acme cube", exact: true }).waitFor();
    await shot("01b-cubes");
    await page.getByRole("link", { name: "acme cube", exact: true }).click();
    await page.getByRole("heading", { name: "acme cube" }).waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem("umx.token"))).toBe(consoleClient.token);
    expect(page.url()).not.toContain(consoleClient.token);

    await page.getByLabel("Role", { exact: true }).selectOption({ label: "operator (human seat)" });
    await page.getByRole("button", { name: "Take seat" }).click();
    await page.getByRole("heading", { name: "Your seat" }).waitFor();
    await page.locator("#stream-status[data-state=live]").waitFor();

    const agent = await mcpAgent(system.url, acme.clients[0]!.token);
    try {
      await agent.tool("seat_attach", { cube_id: acme.cubeId, role_id: acme.roleId });
      const posted = await agent.tool("log_post", { message: "build 412 is green" });
      const agentEntry = page.locator(`li[data-entry-id="${posted.id as string}"]`);
      await agentEntry.getByText("build 412 is green").waitFor();

      await page.getByLabel("Message", { exact: true }).fill("ship it to staging, please");
      await page.getByRole("button", { name: "Post", exact: true }).click();
      const pushedLine = (pattern: RegExp) =>
        agent.pushed.find((p): p is string => typeof p === "string" && pattern.test(p));
      await eventually(
        () => pushedLine(/^#\d+ \S+ → all: ship it to staging, please$/) !== undefined,
        "the agent to receive the console's post as its line",
      );
      // The line's #n is the handle the agent's next call takes.
      const mine = /^#\d+/.exec(pushedLine(/ship it to staging, please$/)!)![0];

      await agentEntry.getByRole("button", { name: "Ack" }).click();
      await agentEntry.getByText("✓ 1 ack").waitFor();
      await eventually(
        () => pushedLine(/^#\d+ ack by \S+: build 412 is green$/) !== undefined,
        "the agent to be told of the console's ack",
      );
      await agentEntry.getByRole("button", { name: "Claim" }).click();
      await agentEntry.getByText(/claimed by/).waitFor();
      const second = await agent.tool("log_claim", { entry_id: posted.id });
      expect(second.outcome).toBe("already_claimed");

      // The agent acks the console's post: the seat's stream carries the notification.
      await agent.tool("log_ack", { entry_id: mine });
      await page.locator("[role=log] li", { hasText: "ship it to staging, please" }).getByText("✓ 1 ack").waitFor();
      const notices = page.getByRole("list", { name: "Notifications" });
      await notices.getByText("[ACK] ship it to staging, please").waitFor();
      await page.locator(`tr[data-drone-id]`).nth(1).waitFor();
      expect(await page.locator("[role=log] li").count()).toBe(2);
      await shot("02-cube-live");
    } finally {
      await agent.close();
    }
  }, 60_000);

  it("shows machines linking and unlinking live, with the time of the change", async () => {
    const machine = await call<{ machine: { id: string }; token: string }>(
      system,
      "unimatrix.presence.v1.MachineService/RegisterMachine",
      { name: "build-01" },
      acme.user,
    );
    await page.getByRole("link", { name: "Machines" }).click();
    const row = page.locator(`tr[data-machine-id="${machine.machine.id}"]`);
    await page.locator(`tr[data-machine-id="${machine.machine.id}"][data-state=unlinked]`).waitFor();
    await page.locator("#stream-status[data-state=live]").waitFor();

    const links = createClient(LinkService, `127.0.0.1:${system.presence.port}`);
    const link = links.link({ metadata: { authorization: `Bearer ${machine.token}` } });
    link.call.on("error", () => {});
    link.send({ event: { case: "hello", value: { agentVersion: "test", hostname: "build-01" } } });
    try {
      await page.locator(`tr[data-machine-id="${machine.machine.id}"][data-state=linked]`).waitFor();
      expect(await row.locator(".state").textContent()).toBe("linked");
      expect(await row.locator("time").getAttribute("datetime")).toMatch(/^\d{4}-\d\d-\d\dT/);
      await shot("03-machine-linked");
    } finally {
      link.cancel();
    }
    await page.locator(`tr[data-machine-id="${machine.machine.id}"][data-state=unlinked]`).waitFor();
    expect(await page.getByText("0 of 1 linked").count()).toBe(1);
    links.close();
    await shot("04-machine-unlinked");
  });

  it("shows devices with their status and where a root session is placed", async () => {
    const owner = acme.clients[1]!.token;
    const enroll = await call<{ token: string }>(
      system,
      "unimatrix.device.v1.EnrollmentService/IssueEnrollToken",
      { ttlSeconds: 600, label: "laptop" },
      owner,
    );
    const enrolled = await call<{ device: { id: string } }>(
      system,
      "unimatrix.device.v1.DeviceService/EnrollDevice",
      {
        enrollToken: enroll.token,
        publicKey: "cHVibGljLWtleS1vZi1sYXB0b3AtNw==",
        platform: "DEVICE_PLATFORM_LINUX",
        displayName: "laptop-7",
      },
      owner,
    );
    await call(
      system,
      "unimatrix.device.v1.PlacementService/PlaceSession",
      { rootSessionId: "root-session-1", deviceId: enrolled.device.id },
      owner,
    );
    await page.getByRole("link", { name: "Devices" }).click();
    const row = page.locator(`tr[data-device-id="${enrolled.device.id}"]`);
    await row.waitFor();
    expect(await row.locator("th").textContent()).toBe("laptop-7");
    expect(await row.locator("td").allTextContents()).toEqual([
      "linux",
      "active",
      "offline",
      "just now",
      "Revoke laptop-7",
    ]);

    await page.getByLabel("Root session", { exact: true }).fill("root-session-1");
    await page.getByRole("button", { name: "Look up" }).click();
    await page.locator(".placement-result").getByText("laptop-7").waitFor();
    expect(await page.locator(".placement-result").textContent()).toContain("root-session-1 runs on laptop-7");
    await shot("05-devices");

    await page.getByLabel("Root session", { exact: true }).fill("no-such-session");
    await page.getByRole("button", { name: "Look up" }).click();
    await page.locator(".placement-result [role=alert]").waitFor();
  });

  it("shows reconnecting… when the gateway goes away and resumes without losing or repeating entries", async () => {
    poster = await call<{ sessionToken: string; drone: { id: string } }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: acme.cubeId, roleId: acme.roleId },
      acme.clients[2]!.token,
    );
    await page.getByRole("link", { name: "Cubes" }).click();
    await page.getByRole("link", { name: "acme cube", exact: true }).click();
    await page.locator("#stream-status[data-state=live]").waitFor();
    const before = await page.locator("[role=log] li").count();

    const port = system.gateway.port;
    await system.gateway.stop();
    await page.locator("#stream-status[data-state=reconnecting]").waitFor();
    expect(await page.locator("#stream-status").textContent()).toBe("reconnecting…");
    await shot("06-reconnecting");

    // While the gateway is down, the cube goes on: three posts straight to the cube service.
    const activity = createClient(ActivityService, `127.0.0.1:${system.cube.port}`);
    try {
      for (const message of ["while away 1", "while away 2", "while away 3"]) {
        await activity.appendEntry(
          { cubeId: acme.cubeId, message, visibility: Visibility.BROADCAST },
          { metadata: { authorization: `Bearer ${poster.sessionToken}` } },
        );
      }
    } finally {
      activity.close();
    }

    restarted = await startGateway({
      config: system.config,
      gateway: {
        ...readConfig(gatewayEnv, {}),
        port,
        cubeAddress: `127.0.0.1:${system.cube.port}`,
        deviceAddress: `127.0.0.1:${system.device.port}`,
        presenceAddress: `127.0.0.1:${system.presence.port}`,
      },
      internalKey: TEST_INTERNAL_KEY,
      logger: silentLogger(),
    });
    await page.locator("#stream-status[data-state=live]").waitFor({ timeout: 20_000 });
    await page.getByText("while away 3").waitFor();
    await call(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: acme.cubeId, message: "back again", visibility: "VISIBILITY_BROADCAST" },
      poster.sessionToken,
    );
    await page.getByText("back again").waitFor();
    const messages = await page.locator("[role=log] li .message").allTextContents();
    expect(messages.slice(before)).toEqual(["while away 1", "while away 2", "while away 3", "back again"]);
    expect(messages).toHaveLength(before + 4);
    await shot("07-resumed");
  }, 60_000);

  it("keeps the seat across a reload, posts from the keyboard, and a user sees direct entries the seat does not", async () => {
    await page.reload();
    await page.getByRole("heading", { name: "Your seat" }).waitFor();
    await page.locator("#stream-status[data-state=live]").waitFor();
    await page.getByLabel("Message", { exact: true }).focus();
    await page.keyboard.type("typed with the keyboard");
    await page.keyboard.press("Control+Enter");
    await page.locator("[role=log] li.mine").getByText("typed with the keyboard").waitFor();

    const { drones } = await call<{ drones: { id: string; label: string; roleName: string }[] }>(
      system,
      "unimatrix.cube.v1.CubeService/ListDrones",
      { cubeId: acme.cubeId },
      acme.user,
    );
    const worker = drones.find((d) => d.label === "worker-1")!;
    const post = (message: string, direct: boolean) =>
      call(
        system,
        "unimatrix.cube.v1.ActivityService/AppendEntry",
        {
          cubeId: acme.cubeId,
          message,
          visibility: direct ? "VISIBILITY_DIRECT" : "VISIBILITY_BROADCAST",
          recipientDroneIds: direct ? [worker.id] : [],
        },
        poster.sessionToken,
      );
    await post("for worker-1 only", true);
    await post("after the direct one", false);
    await page.getByText("after the direct one").waitFor();
    expect(await page.getByText("for worker-1 only").count()).toBe(0);

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("Access token").waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.getByLabel("Access token").fill(acme.user);
    await page.keyboard.press("Enter");
    await page.getByRole("link", { name: "acme cube", exact: true }).click();
    await page.getByRole("heading", { name: "Viewing as a user" }).waitFor();
    const direct = page.locator("[role=log] li.direct", { hasText: "for worker-1 only" });
    await direct.waitFor();
    expect(await direct.locator(".badge.direct").textContent()).toBe("direct → worker-1");
    await page.locator("#stream-status[data-state=live]").waitFor();
    await page.getByLabel("Message", { exact: true }).fill("a word from the admin");
    await page.getByRole("button", { name: "Post", exact: true }).click();
    const posted = page.locator("[role=log] li", { hasText: "a word from the admin" });
    await posted.waitFor();
    expect(await page.getByText("a word from the admin").count()).toBe(1);
    await page.getByText("Record a decision").click();
    await page.getByLabel("Decision", { exact: true }).fill("Deploy on Thursdays");
    await page.getByLabel("Rationale", { exact: true }).fill("the team is all in");
    await page.getByRole("button", { name: "Record", exact: true }).click();
    const decisions = page.getByRole("region", { name: "Decisions" });
    await decisions.getByText("Deploy on Thursdays").waitFor();
    expect(await decisions.getByText("the team is all in").count()).toBe(1);
    await shot("08-user-view");
  });

  it("reloads the activity list when its stream resumes below the retained floor (SSE reset)", async () => {
    // The page is on the cube as the user, live. Keep the newest 2 positions of the cube.
    await call(
      system,
      "unimatrix.cube.v1.CubeService/UpdateCube",
      { cubeId: acme.cubeId, retention: { maxItems: 2 } },
      acme.user,
    );
    await page.locator("#stream-status[data-state=live]").waitFor();
    expect(await page.getByText("a word from the admin").count()).toBe(1);
    const port = (restarted ?? system.gateway).port;
    await (restarted ?? system.gateway).stop();
    await page.locator("#stream-status[data-state=reconnecting]").waitFor();
    // While the gateway is down: three posts, and retention prunes past the console's cursor.
    const activity = createClient(ActivityService, `127.0.0.1:${system.cube.port}`);
    try {
      for (const message of ["kept? no", "kept 1", "kept 2"]) {
        await activity.appendEntry(
          { cubeId: acme.cubeId, message, visibility: Visibility.BROADCAST },
          { metadata: { authorization: `Bearer ${poster.sessionToken}` } },
        );
      }
    } finally {
      activity.close();
    }
    expect((await (system.cube as RunningCube).retentionRound()).held).toBe(true);
    restarted = await startGateway({
      config: system.config,
      gateway: {
        ...readConfig(gatewayEnv, {}),
        port,
        cubeAddress: `127.0.0.1:${system.cube.port}`,
        deviceAddress: `127.0.0.1:${system.device.port}`,
        presenceAddress: `127.0.0.1:${system.presence.port}`,
      },
      internalKey: TEST_INTERNAL_KEY,
      logger: silentLogger(),
    });
    // The resumed stream starts with `reset`: the console reads the retained log again, so what
    // it showed before (now pruned) is gone and exactly the retained entries are listed.
    await page.getByText("kept 2").waitFor({ timeout: 20_000 });
    await eventually(
      async () => (await page.getByText("a word from the admin").count()) === 0,
      "the pruned entries to leave the list",
    );
    await page.locator("#stream-status[data-state=live]").waitFor();
    expect(await page.locator("[role=log] li .message").allTextContents()).toEqual(["kept 1", "kept 2"]);
  }, 60_000);
});
