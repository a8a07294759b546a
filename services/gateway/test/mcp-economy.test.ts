import { mcpEconomy } from "../bench/mcp-economy";
import { OPERATOR_TOKEN, type System, startSystem } from "./system";

// The token-economy session of the benchmark (issue 15), run as a test: the targets are counts of
// calls and characters, not times, so they are asserted here; `npm run bench -- gateway` prints them.
describe("gateway: MCP token economy", () => {
  let system: System;

  beforeAll(async () => {
    system = await startSystem("gw_mcp_economy");
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  it("a host showing only content does the whole session in at most 7 calls and 10,000 characters of results", async () => {
    const report = await mcpEconomy(system.url, OPERATOR_TOKEN);
    expect(report.compact).toBe(true);
    const total = (key: "calls" | "content" | "structured" | "pushes" | "payload") =>
      report.steps.reduce((n, step) => n + step[key], 0);
    expect(total("calls")).toBeLessThanOrEqual(7);
    expect(total("content") + total("structured")).toBeLessThanOrEqual(10_000);
    expect(report.toolsList).toBeLessThanOrEqual(9_000);
    // The catch-up is one call and carries everything: a summary first, then all 51 items.
    const catchUp = report.steps.at(-1)!;
    expect(catchUp.calls).toBe(1);
    const lines = report.catchUp.split("\n");
    expect(lines[0]).toBe("51 unread: 2 direct to you");
    expect(lines).toHaveLength(52);
    for (let i = 1; i <= 50; i++) {
      expect(
        lines.some((line) => line.includes(`status ${String(i).padStart(2, "0")}: invoice batch ${i} migrated`)),
      ).toBe(true);
    }
    expect(lines.filter((line) => / → you: /.test(line))).toHaveLength(2);
    expect(lines.filter((line) => /^#\d+ ack by \S+: on it: reviewing/.test(line))).toHaveLength(1);
    // Nothing of the agent's own is pushed back to it: the post step received no push.
    expect(report.steps.find((s) => s.name === "post")!.pushes).toBe(0);
    // Each push is its text line: at most 150 characters an item, the notification's frame included.
    expect(report.pushedItems).toBeGreaterThanOrEqual(2);
    expect(total("pushes") / report.pushedItems).toBeLessThanOrEqual(150);
  }, 120_000);

  it("on 2026-07-28 the same session takes at most 6 calls and 7,000 characters, with nothing to re-attach", async () => {
    const report = await mcpEconomy(system.url, OPERATOR_TOKEN, "2026-07-28");
    const total = (key: "calls" | "content" | "structured" | "pushes" | "payload") =>
      report.steps.reduce((n, step) => n + step[key], 0);
    expect(total("calls")).toBeLessThanOrEqual(6);
    expect(report.steps.find((s) => s.name === "re-attach after the absence")!.calls).toBe(0);
    expect(total("content") + total("structured")).toBeLessThanOrEqual(7_000);
    expect(report.toolsList).toBeLessThanOrEqual(9_000);
    // The two waiting messages were pushed on the listen stream, each as its line and cursor: at most
    // 150 characters an item besides the protocol's frame (the uri and the subscription id, ~80).
    expect(report.pushedItems).toBeGreaterThanOrEqual(2);
    expect(total("payload") / report.pushedItems).toBeLessThanOrEqual(150);
    expect(total("pushes") / report.pushedItems).toBeLessThanOrEqual(240);
    const lines = report.catchUp.split("\n");
    expect(lines[0]).toBe("51 unread: 2 direct to you");
    expect(lines).toHaveLength(52);
  }, 120_000);
});
