import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type BrowserContext, chromium, type Page } from "playwright-core";

/** Where the console tests put their screenshots (git-ignored). */
export const ARTIFACTS = resolve(__dirname, "../../../test-artifacts/console");

/** Debian's headless Chromium, as every console suite launches it. */
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

/** A persistent Chromium context on a fresh profile folder, 1280 px wide. */
export async function launchChromium(profile: string): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    args: CHROMIUM_ARGS,
    headless: true,
    viewport: { width: 1280, height: 860 },
  });
}

const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

/** One axe-core finding, reduced to what a failure message needs. */
export interface AxeFinding {
  readonly id: string;
  readonly impact: string;
  readonly help: string;
  readonly targets: string[];
}

/**
 * Runs axe-core in the page (its source evaluated through the DevTools protocol, which the
 * console's CSP does not govern) and answers the serious and critical violations.
 */
async function seriousViolations(page: Page): Promise<AxeFinding[]> {
  await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(
            context: Document,
            options: object,
          ): Promise<{ violations: { id: string; impact?: string; help: string; nodes: { target: unknown[] }[] }[] }>;
        };
      }
    ).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => ({ id: v.id, impact: v.impact ?? "", help: v.help, targets: v.nodes.map((n) => String(n.target)) }));
  });
}

/** The page at 1280 px and at 390 px: screenshots of both, an axe check at both, back to 1280. */
export async function checkPage(page: Page, name: string): Promise<void> {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 860 });
    // Nothing may stick out sideways at either width (the page scrolls only vertically).
    const overflow = await page.evaluate(() => {
      if (document.documentElement.scrollWidth <= window.innerWidth) return [];
      const wide = [...document.querySelectorAll("body *")].filter(
        (e) => e.getBoundingClientRect().right > window.innerWidth + 1,
      );
      // Only the outermost offenders: an element inside a wider one says nothing new.
      return wide
        .filter((e) => !wide.includes(e.parentElement as Element))
        .map((e) => `${e.tagName.toLowerCase()}.${e.className}`);
    });
    expect({ name, width, overflow }).toEqual({ name, width, overflow: [] });
    await page.screenshot({ path: join(ARTIFACTS, `${name}-${width}.png`), fullPage: true });
    expect({ name, width, violations: await seriousViolations(page) }).toEqual({ name, width, violations: [] });
  }
  await page.setViewportSize({ width: 1280, height: 860 });
}

/** Presses Tab until `selector` has focus (at most `max` times); answers the focus ring's style. */
export async function tabTo(
  page: Page,
  selector: string,
  max = 120,
): Promise<{ outlineStyle: string; outlineWidth: string }> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    const hit = await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector);
    if (hit) {
      return page.evaluate(() => {
        const style = getComputedStyle(document.activeElement as Element);
        return { outlineStyle: style.outlineStyle, outlineWidth: style.outlineWidth };
      });
    }
  }
  throw new Error(`${selector} was not reached with ${max} presses of Tab`);
}

/** An agent on MCP (the SDK client over streamable HTTP) with the token pasted from the console. */
export async function mcpAgent(url: string, token: string) {
  const client = new Client({ name: "console-admin-agent", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  /** Calls a tool (a tool error throws); answers the text a model reads and the structured result. */
  const result = async (name: string, args: Record<string, unknown> = {}) => {
    const answer = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as {
      isError?: boolean;
      structuredContent?: Record<string, unknown>;
      content: { text: string }[];
    };
    if (answer.isError) throw new Error(`${name}: ${answer.content[0]?.text}`);
    return { text: answer.content.map((c) => c.text).join("\n"), structured: answer.structuredContent ?? {} };
  };
  const tool = async (name: string, args: Record<string, unknown> = {}) => (await result(name, args)).structured;
  return { tool, result, close: () => client.close().catch(() => undefined) };
}
