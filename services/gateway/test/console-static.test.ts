import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isConsolePath, serveConsole } from "../src/static";

/** The static route on its own, over a real HTTP server, against folders the test controls. */
describe("console: static route", () => {
  let server: Server;
  let base: string;
  let root: string;
  let secretDir: string;

  beforeAll(async () => {
    secretDir = mkdtempSync(join(tmpdir(), "umx-console-static-"));
    root = join(secretDir, "console");
    writeFileSync(join(secretDir, "secret.txt"), "outside the console folder");
    server = createServer((request, response) => {
      const path = new URL(request.url ?? "/", "http://x").pathname;
      if (!isConsolePath(path)) {
        response.writeHead(418);
        return void response.end();
      }
      void serveConsole(request, response, path, root);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(secretDir, { recursive: true, force: true });
  });

  it("answers 503 with the command to run when the console was never built", async () => {
    const response = await fetch(`${base}/`);
    expect(response.status).toBe(503);
    expect(await response.text()).toContain("npm run build:web");
    expect((await fetch(`${base}/assets/app.js`)).status).toBe(404);
  });

  it("serves only files inside its folder, with their types, and owns only its paths", async () => {
    mkdirSync(join(root, "assets"), { recursive: true });
    writeFileSync(join(root, "index.html"), "<!doctype html><title>x</title>");
    writeFileSync(join(root, "assets", "app-0123456789ab.js"), "export {};");
    writeFileSync(join(root, "assets", "blob.bin"), "??");
    mkdirSync(join(root, "assets", "dir.js"));

    const index = await fetch(`${base}/index.html`);
    expect([index.status, await index.text()]).toEqual([200, "<!doctype html><title>x</title>"]);
    const js = await fetch(`${base}/assets/app-0123456789ab.js`);
    expect([js.status, js.headers.get("content-type"), await js.text()]).toEqual([
      200,
      "text/javascript; charset=utf-8",
      "export {};",
    ]);
    expect((await fetch(`${base}/assets/blob.bin`)).headers.get("content-type")).toBe("application/octet-stream");
    expect((await fetch(`${base}/assets/dir.js`)).status).toBe(404);
    // URL parsing resolves `%2e%2e` segments before routing: they never reach the console route.
    expect((await fetch(`${base}/assets/%2e%2e/%2e%2e/secret.txt`)).status).toBe(418);
    expect((await fetch(`${base}/assets/..%2f..%2fsecret.txt`)).status).toBe(404);
    expect((await fetch(`${base}/assets/%E0%A4%A`)).status).toBe(404);
    expect((await fetch(`${base}/assets/a%00.js`)).status).toBe(404);
    expect((await fetch(`${base}/index.html`, { method: "POST" })).status).toBe(405);
    expect((await fetch(`${base}/secret.txt`)).status).toBe(418);
    expect(["/", "/index.html", "/favicon.ico", "/assets/x.js"].every(isConsolePath)).toBe(true);
    expect(
      ["/v1/machines/events", "/mcp", "/unimatrix.cube.v1.CubeService/GetCube", "/assets"].some(isConsolePath),
    ).toBe(false);
  });
});
