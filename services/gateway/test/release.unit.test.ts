import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SERVER_INFO } from "../src/mcp/modern";

const root = join(__dirname, "..", "..", "..");

describe("the release the gateway reports", () => {
  it("is the root package.json's version, the newest release in CHANGELOG.md", () => {
    const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
    const newest = /^## (\d+\.\d+\.\d+)/m.exec(readFileSync(join(root, "CHANGELOG.md"), "utf8"))?.[1];
    expect(SERVER_INFO.version).toBe(version);
    expect(newest).toBe(version);
  });
});
