import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { RunningCube } from "@unimatrix/cube";
import { eventually } from "@unimatrix/service-kit/testing";
import type { BrowserContext, Page } from "playwright-core";
import { checkPage, launchChromium, mcpAgent } from "./console-browser";
import { call, type System, seedTenant, startSystem } from "./system";

const GATEWAY = resolve(__dirname, "..");
const ACTIVITY = "unimatrix.cube.v1.ActivityService";
const CUBE = "unimatrix.cube.v1.CubeService";

interface WireEntry {
  id: string;
  position?: string;
  message?: string;
  visibility?: string;
  recipientDroneIds?: string[];
  replyToEntryId?: string;
  threadRootEntryId?: string;
  author?: { droneId?: string; principalKind?: string };
}

/**
 * Issue 16 in the console, end to end (all four services on Postgres and Redis, the gateway, real
 * Chromium): a drone asks the cube's humans; the question is counted on the cubes page and listed
 * in the cube; a user answers it there by clicking and typing, and the asking drone reads the answer
 * in the thread; a question answered elsewhere leaves the list live; threads, receipts of a direct
 * entry (delivered → read → acked), a claim lease with its fence, and a drone's seat state.
 */
describe("console: questions, threads, receipts, claims, seat state", () => {
  let system: System;
  let team: Awaited<ReturnType<typeof seedTenant>>;
  let browser: BrowserContext;
  let page: Page;
  let profile: string;
  let asker: { sessionToken: string; drone: { id: string; label: string } };
  let operator: { sessionToken: string; drone: { id: string; label: string } };
  const as = <T = Record<string, unknown>>(token: string, method: string, body: Record<string, unknown>) =>
    call<T>(system, method, { cubeId: team.cubeId, ...body }, token);
  const thread = (entryId: string) =>
    as<{ root: WireEntry; replies?: WireEntry[] }>(asker.sessionToken, `${ACTIVITY}/ReadThread`, { entryId });

  beforeAll(async () => {
    execFileSync(process.execPath, [join(GATEWAY, "scripts", "build-web.mjs")], { stdio: "ignore" });
    mkdirSync(resolve(__dirname, "../../../test-artifacts/console"), { recursive: true });
    system = await startSystem("gw_console_questions");
    team = await seedTenant(system, "qa", 3);
    const humanRole = await call<{ role: { id: string } }>(
      system,
      `${CUBE}/CreateRole`,
      { cubeId: team.cubeId, name: "operator", humanSeat: true, canBroadcast: true },
      team.user,
    );
    asker = await call(
      system,
      `${CUBE}/AttachSeat`,
      { cubeId: team.cubeId, roleId: team.roleId },
      team.clients[0]!.token,
    );
    // A live human seat: a DIRECT question with no recipients goes to it.
    operator = await call(
      system,
      `${CUBE}/AttachSeat`,
      { cubeId: team.cubeId, roleId: humanRole.role.id },
      team.clients[1]!.token,
    );
    profile = mkdtempSync(join(tmpdir(), "umx-console-questions-"));
    browser = await launchChromium(profile);
    page = browser.pages()[0] ?? (await browser.newPage());
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await system?.stop();
  });

  it("a drone's question is counted and listed, answered in the console, and the drone reads the answer in its thread", async () => {
    const first = await as<{ entry: WireEntry }>(asker.sessionToken, `${ACTIVITY}/AppendEntry`, {
      message: "Which branch do I rebase onto?",
      visibility: "VISIBILITY_DIRECT",
      askHuman: true,
    });
    await page.goto(system.url);
    await page.getByLabel("Access token").fill(team.user);
    await page.keyboard.press("Enter");
    const badge = page.locator(".cube-list a.badge.question");
    await badge.waitFor();
    expect(await badge.textContent()).toBe("1 open question in qa cube");
    expect(await page.locator(".questions-total").textContent()).toBe("1 open question across your cubes");
    await checkPage(page, "questions-01-cubes");

    await page.getByRole("link", { name: "qa cube", exact: true }).click();
    const card = page.getByRole("region", { name: "Questions to answer" });
    const firstRow = card.locator(`li[data-question-id="${first.entry.id}"]`);
    await firstRow.getByText("Which branch do I rebase onto?").waitFor();
    await page.locator("#stream-status[data-state=live]").waitFor();

    // A second question, asked while the console is open, appears without a reload.
    const second = await as<{ entry: WireEntry }>(asker.sessionToken, `${ACTIVITY}/AppendEntry`, {
      message: "May I drop the flaky test?",
      visibility: "VISIBILITY_BROADCAST",
      askHuman: true,
    });
    const secondRow = card.locator(`li[data-question-id="${second.entry.id}"]`);
    await secondRow.getByText("May I drop the flaky test?").waitFor();
    expect(await card.locator(".question-count").textContent()).toBe("2 open questions");
    // Newest first.
    expect(
      await card
        .locator("li[data-question-id]")
        .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-question-id"))),
    ).toEqual([second.entry.id, first.entry.id]);
    // The question is in the log too, marked as one.
    await page.locator(`[role=log] li[data-entry-id="${first.entry.id}"] .badge.question`).waitFor();
    await checkPage(page, "questions-02-open");

    // The user answers the first (direct) question by clicking and typing.
    const answerBox = firstRow.getByLabel(`Answer ${asker.drone.label}`);
    await answerBox.click();
    expect(await firstRow.locator(".help").textContent()).toBe(
      `Your answer goes to ${asker.drone.label}, ${operator.drone.label} (direct).`,
    );
    await page.keyboard.type("Rebase onto main, then push.");
    await firstRow.getByRole("button", { name: "Send answer" }).click();
    await firstRow.waitFor({ state: "detached" });
    expect(await card.locator(".question-count").textContent()).toBe("1 open question");

    // The asking drone reads the answer in the question's thread, addressed to it.
    const read = await thread(first.entry.id);
    expect(read.root.id).toBe(first.entry.id);
    expect(read.replies?.map((r) => r.message)).toEqual(["Rebase onto main, then push."]);
    const answer = read.replies![0]!;
    expect(answer).toMatchObject({
      replyToEntryId: first.entry.id,
      threadRootEntryId: first.entry.id,
      visibility: "VISIBILITY_DIRECT",
    });
    expect(answer.recipientDroneIds).toEqual([asker.drone.id, operator.drone.id]);
    expect(answer.author?.principalKind).toBe("PRINCIPAL_KIND_USER");
    const listed = await as<{ questions?: { entry: WireEntry; answer?: WireEntry }[] }>(
      team.user,
      `${ACTIVITY}/ListQuestions`,
      { includeAnswered: true },
    );
    expect(listed.questions?.map((q) => [q.entry.id, q.answer?.id ?? null])).toEqual([
      [second.entry.id, null],
      [first.entry.id, answer.id],
    ]);

    // In the log, the answer says what it replies to and the question counts its reply.
    const answerItem = page.locator(`[role=log] li[data-entry-id="${answer.id}"]`);
    await answerItem.getByText(`↩ reply to ${asker.drone.label}: “Which branch do I rebase onto?”`).waitFor();
    await page
      .locator(`[role=log] li[data-entry-id="${first.entry.id}"]`)
      .getByRole("button", { name: "1 reply" })
      .waitFor();

    // The human seat answers the second question over Connect: the console's list drops it live.
    await as(operator.sessionToken, `${ACTIVITY}/AppendEntry`, {
      message: "Yes, and file an issue for it.",
      visibility: "VISIBILITY_BROADCAST",
      replyToEntryId: second.entry.id,
    });
    await secondRow.waitFor({ state: "detached" });
    await card.getByText("No open questions.").waitFor();
    expect(await card.locator(".question-count").textContent()).toBe("0 open questions");
  }, 90_000);

  it("an agent asks over MCP, the question appears in the console, is answered there, and the agent's log_wait on the thread returns it", async () => {
    const agent = await mcpAgent(system.url, team.clients[0]!.token);
    try {
      const seat = await agent.tool("seat_attach", { cube_id: team.cubeId, role_id: team.roleId });
      const sessionToken = seat.session_token as string;
      await agent.tool("log_read");
      // The agent asks the humans over MCP (log_post ask_human: DIRECT to the live human seats).
      const posted = await agent.tool("log_post", { message: "Can I merge PR 77 before the freeze?", ask_human: true });
      const asked = { entry: { id: posted.id as string } };
      // The agent waits on the question's thread (a host that ignores notifications): log_wait
      // blocks until the answer arrives and returns it.
      const waited: { text: string; structured: Record<string, unknown> }[] = [];
      const waiting = (async () => {
        const deadline = Date.now() + 60_000;
        while (Date.now() < deadline) {
          const got = await agent.result("log_wait", { thread: asked.entry.id, timeout_s: 50 });
          waited.push(got);
          if (got.text.includes("Merge it; the freeze starts tomorrow.")) return got;
        }
        throw new Error(`log_wait never returned the answer: ${JSON.stringify(waited)}`);
      })();

      const card = page.getByRole("region", { name: "Questions to answer" });
      const row = card.locator(`li[data-question-id="${asked.entry.id}"]`);
      await row.getByText("Can I merge PR 77 before the freeze?").waitFor();
      const label = (await row.locator(".author").textContent()) ?? "";
      const box = row.getByRole("textbox", { name: `Answer ${label}` });
      await box.click();
      await page.keyboard.type("Merge it; the freeze starts tomorrow.");
      await row.getByRole("button", { name: "Send answer" }).click();
      await row.waitFor({ state: "detached" });

      const got = await waiting;
      const read = await as<{ root: WireEntry; replies?: WireEntry[] }>(sessionToken, `${ACTIVITY}/ReadThread`, {
        entryId: asked.entry.id,
      });
      expect(read.replies?.map((r) => r.message)).toEqual(["Merge it; the freeze starts tomorrow."]);
      const answerAt = Number(read.replies![0]!.position);
      expect((got.structured.items as { n: number }[]).some((i) => i.n === answerAt)).toBe(true);
      expect(read.replies![0]!.recipientDroneIds).toEqual([seat.drone_id, operator.drone.id]);
    } finally {
      await agent.close();
    }
  }, 120_000);

  it("opens a thread from its reply count, replies in it, and the drone reads the reply in order", async () => {
    const { questions } = await as<{ questions: { entry: WireEntry }[] }>(team.user, `${ACTIVITY}/ListQuestions`, {
      includeAnswered: true,
    });
    const root = questions.find((q) => q.entry.message === "Which branch do I rebase onto?")!.entry;
    await page.locator(`[role=log] li[data-entry-id="${root.id}"]`).getByRole("button", { name: "1 reply" }).click();
    const panel = page.getByRole("region", { name: /^Thread/ });
    await panel.getByText("Rebase onto main, then push.").waitFor();
    expect(await panel.locator("li[data-entry-id]").count()).toBe(2);
    expect(await panel.getByRole("heading").first().textContent()).toBe("Thread (1 reply)");
    await panel.getByLabel("Reply", { exact: true }).fill("And run the e2e suite before you push.");
    await panel.getByRole("button", { name: "Send reply" }).click();
    await panel.getByText("And run the e2e suite before you push.").waitFor();
    expect(await panel.getByRole("heading").first().textContent()).toBe("Thread (2 replies)");
    await page
      .locator(`[role=log] li[data-entry-id="${root.id}"]`)
      .getByRole("button", { name: "2 replies" })
      .waitFor();
    await checkPage(page, "questions-03-thread");

    const read = await thread(root.id);
    expect(read.replies?.map((r) => r.message)).toEqual([
      "Rebase onto main, then push.",
      "And run the e2e suite before you push.",
    ]);
    expect(read.replies?.[1]?.replyToEntryId).toBe(root.id);
    await panel.getByRole("button", { name: "Close thread" }).click();
    expect(await panel.count()).toBe(0);
  }, 60_000);

  it("shows a direct entry's receipts per recipient: delivered, read, acked", async () => {
    await page.getByLabel("To", { exact: true }).selectOption({ label: `${asker.drone.label} only (direct)` });
    await page.getByLabel("Message", { exact: true }).fill("Please confirm the release notes.");
    await page.getByRole("button", { name: "Post", exact: true }).click();
    const item = page.locator("[role=log] li", { hasText: "Please confirm the release notes." });
    await item.waitFor();
    const entryId = (await item.getAttribute("data-entry-id"))!;
    await item.getByRole("button", { name: "Receipts" }).click();
    expect(await item.getByRole("button", { name: "Receipts" }).getAttribute("aria-expanded")).toBe("true");
    const receipt = item.locator(`.receipts li[data-drone-id="${asker.drone.id}"]`);
    await receipt.waitFor();
    expect(["pending", "delivered"]).toContain(await receipt.getAttribute("data-receipt"));

    // The drone reads its unread entries (the console's direct one among them), then acks it.
    await as(asker.sessionToken, `${ACTIVITY}/ReadActivity`, { pageSize: 500 });
    await item
      .locator(`.receipts li[data-drone-id="${asker.drone.id}"][data-receipt=read]`)
      .waitFor({ timeout: 20_000 });
    await as(asker.sessionToken, `${ACTIVITY}/AckEntry`, { entryId });
    await item
      .locator(`.receipts li[data-drone-id="${asker.drone.id}"][data-receipt=acked]`)
      .waitFor({ timeout: 20_000 });
    const steps = await receipt.locator(".step").evaluateAll((s) => s.map((e) => e.getAttribute("data-step")));
    expect(steps.filter((s) => s !== "delivered")).toEqual(["read", "acked"]);
    expect(await receipt.locator(".badge").textContent()).toBe("acked");
    await checkPage(page, "questions-04-receipts");
  }, 60_000);

  it("shows a claim's holder, fence, state and when it turns stale, and a drone's seat state apart from last seen", async () => {
    const posted = await as<{ entry: WireEntry }>(asker.sessionToken, `${ACTIVITY}/AppendEntry`, {
      message: "I take the flaky-test ticket.",
      visibility: "VISIBILITY_BROADCAST",
    });
    await as(asker.sessionToken, `${ACTIVITY}/ClaimEntry`, { entryId: posted.entry.id });
    // A user gets no notifications: claims on others' entries show after a reload (documented).
    await page.reload();
    const claim = page.locator(`[role=log] li[data-entry-id="${posted.entry.id}"] .claim`);
    await claim.waitFor();
    expect(await claim.getAttribute("data-claim-state")).toBe("held");
    expect(await claim.getAttribute("data-fence")).toBe("1");
    expect(await claim.textContent()).toMatch(
      new RegExp(`^⚑ claimed by ${asker.drone.label} · fence 1 · held stale in \\d+ min$`),
    );

    const row = page.locator(`table.drones tr[data-drone-id="${asker.drone.id}"]`);
    await row.locator("td.seat-state[data-state=unset]").waitFor();
    await page.locator("#stream-status[data-state=live]").waitFor();
    await as(asker.sessionToken, `${CUBE}/SetSeatState`, {
      state: "SEAT_STATE_WAITING",
      note: "on the release notes review",
    });
    await row.locator("td.seat-state[data-state=waiting]").waitFor();
    expect(await row.locator("td.seat-state").textContent()).toBe("waitingon the release notes reviewsince just now");
    expect(await row.locator("td.last-seen time").count()).toBe(1);
    await page.locator("[role=log] li.seat-change").getByText("now waiting: on the release notes review").waitFor();
    await checkPage(page, "questions-05-claims-seat-state");
  }, 60_000);

  it("shows a claim gone stale when its holder's session ends, and takes it over with the next fence", async () => {
    const holderClient = team.clients[2]!;
    const holder = await call<{ sessionToken: string; drone: { id: string; label: string } }>(
      system,
      `${CUBE}/AttachSeat`,
      { cubeId: team.cubeId, roleId: team.roleId },
      holderClient.token,
    );
    const posted = await as<{ entry: WireEntry }>(holder.sessionToken, `${ACTIVITY}/AppendEntry`, {
      message: "I take the parser refactor.",
      visibility: "VISIBILITY_BROADCAST",
    });
    await as(holder.sessionToken, `${ACTIVITY}/ClaimEntry`, { entryId: posted.entry.id });
    // The holder's session ends (its client's credential is rotated); the cube's liveness scan
    // (run here rather than waiting for its timer; the timer may win, either way once) finds the
    // claim stale.
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/RotateClientCredential",
      { clientId: holderClient.id },
      team.user,
    );
    await (system.cube as RunningCube).livenessRound();
    const claimOf = async () =>
      (
        await as<{ root: { claim?: { state?: string; fence?: string } } }>(team.user, `${ACTIVITY}/ReadThread`, {
          entryId: posted.entry.id,
        })
      ).root.claim;
    await eventually(async () => (await claimOf())?.state === "CLAIM_STATE_STALE", "the claim to turn stale", 10_000);
    expect(await claimOf()).toMatchObject({ state: "CLAIM_STATE_STALE", fence: "1" });

    await page.reload();
    const item = page.locator(`[role=log] li[data-entry-id="${posted.entry.id}"]`);
    const claim = item.locator(".claim");
    await claim.waitFor();
    expect(await claim.getAttribute("data-claim-state")).toBe("stale");
    expect(await claim.textContent()).toBe(`⚑ claimed by ${holder.drone.label} · fence 1 · stale since just now`);
    await item.getByRole("button", { name: "Take over" }).click();
    await item.locator('.claim[data-claim-state=held][data-fence="2"]').waitFor();
    expect(await item.locator(".claim").textContent()).toMatch(
      /^⚑ claimed by qa admin · fence 2 · held stale in \d+ min$/,
    );
    expect(await item.getByRole("button", { name: "Take over" }).count()).toBe(0);
    const fence = (n: number) =>
      as<{ holds?: boolean }>(team.user, `${ACTIVITY}/CheckFence`, { entryId: posted.entry.id, fence: String(n) });
    expect((await fence(1)).holds ?? false).toBe(false);
    expect((await fence(2)).holds).toBe(true);
    await checkPage(page, "questions-06-taken-over");
  }, 60_000);

  it("a person in a human seat answers a question to the humans, and the answer leaves the seat itself out", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("Access token").fill(team.clients[1]!.token);
    await page.keyboard.press("Enter");
    await page.getByRole("link", { name: "qa cube", exact: true }).click();
    await page.getByLabel("Role", { exact: true }).selectOption({ label: "operator (human seat)" });
    await page.getByRole("button", { name: "Take seat" }).click();
    await page.getByRole("heading", { name: "Your seat" }).waitFor();
    const seatLabel = (await page.locator(".seat strong").textContent()) ?? "";
    await page.locator("#stream-status[data-state=live]").waitFor();
    const seated = await call<{ drones: { id: string; label: string }[] }>(
      system,
      `${CUBE}/ListDrones`,
      { cubeId: team.cubeId },
      team.user,
    );
    const seatDrone = seated.drones.find((d) => d.label === seatLabel)!;

    // DIRECT with no recipients: the question goes to the live human seats, this one among them.
    const asked = await as<{ entry: WireEntry }>(asker.sessionToken, `${ACTIVITY}/AppendEntry`, {
      message: "Is the staging database safe to reset?",
      visibility: "VISIBILITY_DIRECT",
      askHuman: true,
    });
    expect(asked.entry.recipientDroneIds?.sort()).toEqual([operator.drone.id, seatDrone.id].sort());
    const row = page
      .getByRole("region", { name: "Questions to answer" })
      .locator(`li[data-question-id="${asked.entry.id}"]`);
    await row.getByText("Is the staging database safe to reset?").waitFor();
    await page.locator(`[role=log] li[data-entry-id="${asked.entry.id}"]`).waitFor();
    const box = row.getByRole("textbox", { name: `Answer ${asker.drone.label}` });
    await box.click();
    expect(await row.locator(".help").textContent()).toBe(
      `Your answer goes to ${asker.drone.label}, ${operator.drone.label} (direct).`,
    );
    await box.fill("Yes, nobody uses it today.");
    await box.press("Control+Enter");
    await row.waitFor({ state: "detached" });
    const read = await thread(asked.entry.id);
    expect(read.replies?.map((r) => [r.message, r.author?.droneId, r.recipientDroneIds])).toEqual([
      ["Yes, nobody uses it today.", seatDrone.id, [asker.drone.id, operator.drone.id]],
    ]);
    await checkPage(page, "questions-07-human-seat");
  }, 60_000);
});
