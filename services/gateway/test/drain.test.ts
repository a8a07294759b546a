import { Agent, get, type IncomingHttpHeaders } from "node:http";
import { eventually } from "@unimatrix/service-kit/testing";
import { addGateway, call, type System, seedTenant, startSystem } from "./system";

/** A GET on `agent` (one keep-alive socket): its status, headers and whether it reused a socket. */
function getOn(agent: Agent, url: string): Promise<{ status: number; headers: IncomingHttpHeaders; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const request = get(url, { agent }, (response) => {
      response.resume();
      response.on("end", () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, reused: request.reusedSocket }),
      );
    });
    request.on("error", reject);
  });
}

describe("gateway: a drain on SIGTERM, as cube's and presence's", () => {
  let system: System;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    system = await startSystem("gw_drain");
    acme = await seedTenant(system, "acme", 1);
  }, 120_000);
  afterAll(async () => {
    await system.stop();
  });

  it("answers /readyz 503 and keeps serving with every connection closed after its response, then ends its SSE streams cleanly", async () => {
    const gateway = await addGateway(system, {}, { drainDelayMs: 1_500 });
    const token = acme.clients[0]!.token;
    // An SSE stream, live.
    const sse = await fetch(`${gateway.url}/v1/cubes/${acme.cubeId}/events`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const reader = sse.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    let ended: "clean" | string | undefined;
    const reading = (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) {
            ended = "clean";
            return;
          }
          text += value;
        }
      } catch (error) {
        ended = String(error);
      }
    })();
    await eventually(() => text.includes("event: ready"), "the SSE stream is live");
    // A keep-alive connection, idle before the drain.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const before = await getOn(agent, `${gateway.url}/healthz`);
    expect(before.headers.connection).toBe("keep-alive");

    let stopped = false;
    const stopping = gateway.stop().then(() => {
      stopped = true;
    });
    expect(await fetch(`${gateway.url}/readyz`).then((r) => r.status)).toBe(503);
    // Still serving: the idle keep-alive connection is answered, and closed after its response.
    const during = await getOn(agent, `${gateway.url}/healthz`);
    expect(during).toMatchObject({ status: 200, reused: true, headers: { connection: "close" } });
    const { cube } = await call<{ cube: { id: string } }>(
      { url: gateway.url },
      "unimatrix.cube.v1.CubeService/GetCube",
      { cubeId: acme.cubeId },
      acme.user,
    );
    expect(cube.id).toBe(acme.cubeId);
    // The SSE stream ends cleanly at the end of the drain (its client resumes elsewhere), not before.
    expect(ended).toBeUndefined();
    await reading;
    expect(ended).toBe("clean");
    await stopping;
    expect(stopped).toBe(true);
    agent.destroy();
  });
});
