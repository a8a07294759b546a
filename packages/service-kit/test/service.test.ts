import { once } from "node:events";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Int32ValueSchema } from "@bufbuild/protobuf/wkt";
import type * as grpc from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { readConfig } from "@unimatrix/service-kit/config";
import { isShutdown, ShutdownReason } from "@unimatrix/service-kit/errors";
import { type CallContext, createClient, route, type ServiceImpl } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { defineService, startService } from "@unimatrix/service-kit/service";
import {
  asBearer,
  eventually,
  expectStatus,
  type TestSchema,
  testBusPrefix,
  testConfig,
  testSchema,
} from "@unimatrix/service-kit/testing";
import { z } from "zod";
import { EchoService } from "./fixtures/echo-service";

type Str = { value: string };
type Num = { value: number };

/** A manifest-built service over the echo fixture, recording what the kit did and in which order. */
function echoManifest(log: string[]) {
  const env = { greeting: { name: "ECHO_GREETING", description: "greeting", schema: z.string(), defaultValue: "hi" } };
  return defineService({
    name: "echo",
    env,
    migrationsDir: join(__dirname, "fixtures", "migrations"),
    readConfig: (source = process.env) => readConfig(env, source),
    async wire(deps, config) {
      // The wiring can use the database the kit opened (migrated) before the host exists.
      const session = await deps.database.openSession();
      const rows = await session.query<{ name: string }>("SELECT name FROM widget WHERE id = 1");
      await session.close();
      let ticks = 0;
      const impl = {
        async say(request: Str, ctx: CallContext) {
          if (request.value === "who") {
            const principal = await ctx.principal();
            return { value: `${principal.kind}:${principal.subjectId}` };
          }
          return { value: `${config.greeting} ${request.value} from ${rows[0]?.name}` };
        },
        async *count(_request: Num, ctx: CallContext) {
          yield { value: 1 };
          await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
          log.push(
            `stream ended: shutdown=${isShutdown(ctx.signal)} typed=${ctx.signal.reason instanceof ShutdownReason}`,
          );
          yield { value: 2 };
        },
        async *chat(requests: AsyncIterable<Str>) {
          for await (const request of requests) yield { value: request.value };
        },
      } as unknown as ServiceImpl<typeof EchoService>;
      return {
        routes: [route(EchoService, impl)],
        // Built from what the wiring opened: no two-phase start.
        authenticate: async (metadata: grpc.Metadata) => {
          if (metadata.get("authorization")[0] !== "Bearer letmein") throw new Error("nope");
          return { kind: "user" as const, subjectId: "u-1", tenantId: "t-1" };
        },
        background: [{ name: "tick", everyMs: 5, run: async () => ++ticks }],
        extra: { ticks: () => ticks },
        async close() {
          log.push(`close after ${ticks} ticks`);
        },
      };
    },
  });
}

describe("startService (manifest)", () => {
  let schema: TestSchema;
  beforeAll(() => {
    schema = testSchema("manifest");
  });
  afterAll(async () => {
    await schema.drop();
  });

  it("migrates, wires with the opened deps, serves the routes with the wiring's authenticator, runs background jobs, and stops in order", async () => {
    const log: string[] = [];
    // Background rounds fire as this clock is moved, so a stopped timer shows by never firing.
    const timers = new ManualClock();
    const service = await startService(echoManifest(log), {
      config: testConfig({ busPrefix: testBusPrefix("manifest") }),
      port: 0,
      schema: schema.schema,
      serviceConfig: { greeting: "hello" },
      logger: silentLogger(),
      timers,
    });
    const client = createClient(EchoService, `127.0.0.1:${service.port}`) as unknown as Record<
      string,
      (...args: unknown[]) => never
    > & { close(): void };
    try {
      expect(((await client.say!({ value: "you" })) as Str).value).toBe("hello you from first");
      expect(((await client.say!({ value: "who" }, asBearer("letmein"))) as Str).value).toBe("user:u-1");
      await expectStatus(client.say!({ value: "who" }, asBearer("wrong")), status.INTERNAL);
      const ticks = service.extra.ticks as () => number;
      timers.advance(5);
      await eventually(() => ticks() === 1, "the first background tick");
      timers.advance(5);
      await eventually(() => ticks() >= 2, "two background ticks");
      const before = ticks();
      expect(await service.runBackground("tick")).toBe(before + 1);
      await expect(service.runBackground("missing")).rejects.toThrow("echo has no background job missing");

      const stream = client.count!(create(Int32ValueSchema, { value: 0 })) as grpc.ClientReadableStream<Num>;
      const values: number[] = [];
      stream.on("data", (m: Num) => values.push(m.value));
      await eventually(() => values.length === 1, "the stream's first message");
      const ended = once(stream, "end");
      await service.stop();
      await ended;
      expect(values).toEqual([1, 2]);
      const stoppedAt = ticks();
      // The job's timer is gone: no timer is left, and moving time on fires no round.
      expect(timers.timers).toBe(0);
      timers.advance(60_000);
      expect(ticks()).toBe(stoppedAt);
      expect(log).toEqual(["stream ended: shutdown=true typed=true", `close after ${stoppedAt} ticks`]);
    } finally {
      client.close();
      await service.stop();
    }
  });
});
