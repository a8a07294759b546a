import { once } from "node:events";
import { create } from "@bufbuild/protobuf";
import { Int32ValueSchema, StringValueSchema } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { ServerReflection } from "@unimatrix/contracts/grpc/reflection/v1/reflection_pb";
import { PRINCIPAL_HEADER, type Principal, principalResolver, signPrincipal } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError, isShutdown, ShutdownReason } from "@unimatrix/service-kit/errors";
import { type CallContext, createClient, GrpcHost } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { eventually, TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { EchoService } from "./fixtures/echo-service";

type Str = { value: string };
type Num = { value: number };

const user: Principal = { kind: "user", subjectId: "u-1", tenantId: "t-1" };

describe("gRPC host", () => {
  let host: GrpcHost;
  let address: string;
  let aborts: string[];
  let streamStarted: () => void;
  const streamStartedP = new Promise<void>((resolve) => {
    streamStarted = resolve;
  });

  beforeAll(async () => {
    aborts = [];
    host = new GrpcHost({
      logger: silentLogger(),
      authenticate: principalResolver({ internalKey: TEST_INTERNAL_KEY }),
    });
    host.addService(EchoService, {
      async say(request: Str, ctx: CallContext) {
        if (request.value === "bad") throw new InvalidArgumentError("value", "must not be bad");
        if (request.value === "boom") throw new Error("secret detail");
        if (request.value === "who") {
          const principal = await ctx.principal();
          return { value: `${principal.kind}:${principal.subjectId}` };
        }
        if (request.value === "id") return { value: ctx.requestId };
        return { value: `echo ${request.value}` };
      },
      async *count(request: Num, ctx: CallContext) {
        if (request.value < 0) throw new InvalidArgumentError("value", "must be >= 0");
        for (let i = 1; i <= request.value; i++) yield { value: i };
        if (request.value === 0) {
          // An endless stream that only stops when the caller cancels or the server stops.
          streamStarted();
          await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
          aborts.push(String(ctx.signal.reason));
        }
      },
      async *chat(requests: AsyncIterable<Str>) {
        for await (const request of requests) yield { value: request.value.toUpperCase() };
      },
    } as never);
    const port = await host.listen("127.0.0.1", 0);
    address = `127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await host.shutdown(1_000);
  });

  const echo = () => createClient(EchoService, address) as unknown as Record<string, (...args: unknown[]) => never>;

  it("serves unary calls with the request id the caller sent", async () => {
    const client = echo();
    try {
      const reply: Str = await client.say!(create(StringValueSchema, { value: "hi" }));
      expect(reply.value).toBe("echo hi");
      const id: Str = await client.say!(create(StringValueSchema, { value: "id" }), {
        metadata: { "x-request-id": "req-123" },
      });
      expect(id.value).toBe("req-123");
    } finally {
      (client as unknown as { close(): void }).close();
    }
  });

  it("maps domain errors to their code and message, and anything else to a bare INTERNAL", async () => {
    const client = echo();
    try {
      await expect(client.say!(create(StringValueSchema, { value: "bad" }))).rejects.toMatchObject({
        code: grpc.status.INVALID_ARGUMENT,
        details: "value: must not be bad",
      });
      await expect(client.say!(create(StringValueSchema, { value: "boom" }))).rejects.toMatchObject({
        code: grpc.status.INTERNAL,
        details: "internal error",
      });
    } finally {
      (client as unknown as { close(): void }).close();
    }
  });

  it("accepts a signed principal and refuses a forged or missing one", async () => {
    const client = echo();
    const who = create(StringValueSchema, { value: "who" });
    try {
      const signed: Str = await client.say!(who, {
        metadata: { [PRINCIPAL_HEADER]: signPrincipal(user, TEST_INTERNAL_KEY) },
      });
      expect(signed.value).toBe("user:u-1");
      const forged = signPrincipal(
        { kind: "operator", subjectId: "operator", tenantId: null },
        "another-key-of-enough-length-000000",
      );
      await expect(client.say!(who, { metadata: { [PRINCIPAL_HEADER]: forged } })).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
      const expired = signPrincipal(user, TEST_INTERNAL_KEY, Date.now() - 120_000);
      await expect(client.say!(who, { metadata: { [PRINCIPAL_HEADER]: expired } })).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
      await expect(client.say!(who)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    } finally {
      (client as unknown as { close(): void }).close();
    }
  });

  it("streams server responses in order and ends cleanly", async () => {
    const client = echo();
    try {
      const seen: number[] = [];
      for await (const message of client.count!(create(Int32ValueSchema, { value: 200 })) as AsyncIterable<Num>) {
        seen.push(message.value);
      }
      expect(seen).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      const failing = client.count!(create(Int32ValueSchema, { value: -1 })) as AsyncIterable<Num>;
      await expect(
        (async () => {
          for await (const _ of failing) {
            // no messages expected
          }
        })(),
      ).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: "value: must be >= 0" });
    } finally {
      (client as unknown as { close(): void }).close();
    }
  });

  it("runs bidi streams message by message", async () => {
    const client = echo();
    try {
      const chat = client.chat!() as unknown as AsyncIterable<Str> & { send(m: unknown): void; end(): void };
      const replies: string[] = [];
      const reading = (async () => {
        for await (const reply of chat) replies.push(reply.value);
      })();
      for (const word of ["a", "b", "c"]) chat.send(create(StringValueSchema, { value: word }));
      chat.end();
      await reading;
      expect(replies).toEqual(["A", "B", "C"]);
    } finally {
      (client as unknown as { close(): void }).close();
    }
  });

  it("aborts the handler's signal when the caller cancels", async () => {
    const client = echo();
    try {
      const controller = new AbortController();
      const stream = client.count!(create(Int32ValueSchema, { value: 0 }), {
        signal: controller.signal,
      }) as grpc.ClientReadableStream<Num>;
      stream.on("error", () => {});
      await streamStartedP;
      controller.abort();
      const until = Date.now() + 5_000;
      while (aborts.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
      expect(aborts).toEqual(["Error: call cancelled"]);
    } finally {
      (client as unknown as { close(): void }).close();
    }
  });

  it("answers grpc.health.v1 and server reflection for what it serves", async () => {
    const health = createClient(Health, address);
    const reflection = createClient(ServerReflection, address);
    try {
      expect((await health.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      expect((await health.check({ service: "testing.echo.v1.EchoService" })).status).toBe(
        HealthCheckResponse_ServingStatus.SERVING,
      );
      await expect(health.check({ service: "nope.Service" })).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });

      const call = reflection.serverReflectionInfo();
      call.send({ messageRequest: { case: "listServices", value: "" } });
      call.send({ messageRequest: { case: "fileContainingSymbol", value: "testing.echo.v1.EchoService.Say" } });
      call.send({ messageRequest: { case: "fileContainingSymbol", value: "no.such.Symbol" } });
      call.end();
      const answers = [];
      for await (const answer of call) answers.push(answer.messageResponse);
      expect(answers[0]?.case).toBe("listServicesResponse");
      const names = answers[0]?.case === "listServicesResponse" ? answers[0].value.service.map((s) => s.name) : [];
      expect(names).toEqual(["testing.echo.v1.EchoService", "grpc.health.v1.Health"]);
      expect(answers[1]?.case).toBe("fileDescriptorResponse");
      // The file itself and the wrappers it imports.
      expect(answers[1]?.case === "fileDescriptorResponse" && answers[1].value.fileDescriptorProto.length).toBe(2);
      expect(answers[2]).toMatchObject({ case: "errorResponse", value: { errorCode: grpc.status.NOT_FOUND } });
    } finally {
      health.close();
      reflection.close();
    }
  });
});

describe("gRPC host without an implementation", () => {
  it("answers UNIMPLEMENTED for unary and streaming methods alike", async () => {
    const host = new GrpcHost({ logger: silentLogger() });
    host.addService(EchoService, {});
    const port = await host.listen("127.0.0.1", 0);
    const client = createClient(EchoService, `127.0.0.1:${port}`) as unknown as Record<
      string,
      (...a: unknown[]) => never
    > & {
      close(): void;
    };
    try {
      await expect(client.say!(create(StringValueSchema, { value: "x" }))).rejects.toMatchObject({
        code: grpc.status.UNIMPLEMENTED,
      });
      const stream = client.count!(create(Int32ValueSchema, { value: 1 })) as AsyncIterable<Num>;
      await expect(
        (async () => {
          for await (const _ of stream) {
            // nothing arrives
          }
        })(),
      ).rejects.toMatchObject({
        code: grpc.status.UNIMPLEMENTED,
        details: "/testing.echo.v1.EchoService/Count is not implemented",
      });
    } finally {
      client.close();
      await host.shutdown(1_000);
    }
  });
});

describe("gRPC host shutdown", () => {
  it("reports NOT_SERVING, ends open streams through their signal and stops within the grace", async () => {
    const host = new GrpcHost({ logger: silentLogger() });
    let ended = false;
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    host.addService(EchoService, {
      async *count(_request: Num, ctx: CallContext) {
        yield { value: 1 };
        started();
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        ended = true;
        yield { value: 2 };
      },
    } as never);
    const port = await host.listen("127.0.0.1", 0);
    const client = createClient(EchoService, `127.0.0.1:${port}`) as unknown as Record<
      string,
      (...a: unknown[]) => never
    > & {
      close(): void;
    };
    const health = createClient(Health, `127.0.0.1:${port}`);
    const watch = health.watch({ service: "" });
    const statuses: HealthCheckResponse_ServingStatus[] = [];
    const watching = (async () => {
      for await (const update of watch) statuses.push(update.status);
    })().catch(() => {});
    const stream = client.count!(create(Int32ValueSchema, { value: 1 })) as grpc.ClientReadableStream<Num>;
    const values: number[] = [];
    stream.on("data", (m: Num) => values.push(m.value));
    await running;
    const stopped = host.shutdown(5_000);
    await once(stream, "end");
    await stopped;
    await watching;
    expect(ended).toBe(true);
    expect(values).toEqual([1, 2]);
    expect(statuses).toEqual([
      HealthCheckResponse_ServingStatus.SERVING,
      HealthCheckResponse_ServingStatus.NOT_SERVING,
    ]);
    client.close();
    health.close();
  });
});

describe("gRPC host draining", () => {
  it("answers NOT_SERVING yet keeps serving for the drain delay, then ends streams with ShutdownReason", async () => {
    const host = new GrpcHost({ logger: silentLogger() });
    const reasons: unknown[] = [];
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    host.addService(EchoService, {
      async say(request: Str) {
        return { value: `echo ${request.value}` };
      },
      async *count(_request: Num, ctx: CallContext) {
        yield { value: 1 };
        started();
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        reasons.push(ctx.signal.reason);
        // The typed going-away a real stream sends.
        if (isShutdown(ctx.signal)) yield { value: -1 };
      },
    } as never);
    const port = await host.listen("127.0.0.1", 0);
    const client = createClient(EchoService, `127.0.0.1:${port}`) as unknown as Record<
      string,
      (...a: unknown[]) => never
    > & { close(): void };
    const health = createClient(Health, `127.0.0.1:${port}`);
    const stream = client.count!(create(Int32ValueSchema, { value: 1 })) as grpc.ClientReadableStream<Num>;
    const values: number[] = [];
    stream.on("data", (m: Num) => values.push(m.value));
    await running;
    const stopped = host.shutdown(5_000, 3_000);
    // Polled like a load balancer: NOT_SERVING shows at once, while calls are still answered.
    await eventually(
      async () => (await health.check({ service: "" })).status === HealthCheckResponse_ServingStatus.NOT_SERVING,
      "NOT_SERVING",
    );
    expect((await health.check({ service: "testing.echo.v1.EchoService" })).status).toBe(
      HealthCheckResponse_ServingStatus.NOT_SERVING,
    );
    const answer = await (client.say as unknown as (r: unknown) => Promise<Str>)(
      create(StringValueSchema, { value: "late" }),
    );
    expect(answer.value).toBe("echo late");
    expect(reasons).toEqual([]);
    await once(stream, "end");
    await stopped;
    expect(values).toEqual([1, -1]);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toBeInstanceOf(ShutdownReason);
    client.close();
    health.close();
  });

  it("sends an aged connection GOAWAY (clients re-resolve) while its open stream goes on", async () => {
    const host = new GrpcHost({ logger: silentLogger(), maxConnectionAgeMs: 300 });
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    host.addService(EchoService, {
      async say(request: Str) {
        return { value: `echo ${request.value}` };
      },
      async *count(_request: Num, ctx: CallContext) {
        yield { value: 1 };
        started();
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      },
    } as never);
    const port = await host.listen("127.0.0.1", 0);
    const client = createClient(EchoService, `127.0.0.1:${port}`) as unknown as Record<
      string,
      (...a: unknown[]) => never
    > & { close(): void; raw: grpc.Client };
    try {
      const stream = client.count!(create(Int32ValueSchema, { value: 1 })) as grpc.ClientReadableStream<Num>;
      let streamError: unknown;
      stream.on("error", (e) => {
        streamError = e;
      });
      stream.on("data", () => {});
      await running;
      const channel = client.raw.getChannel();
      expect(channel.getConnectivityState(false)).toBe(grpc.connectivityState.READY);
      // GOAWAY after ~300 ms: the channel leaves READY (to IDLE), so the next call resolves again.
      await eventually(
        () => channel.getConnectivityState(false) !== grpc.connectivityState.READY,
        "the channel to leave READY after GOAWAY",
      );
      const answer = await (client.say as unknown as (r: unknown) => Promise<Str>)(
        create(StringValueSchema, { value: "again" }),
      );
      expect(answer.value).toBe("echo again");
      expect(streamError).toBeUndefined();
      stream.cancel();
    } finally {
      client.close();
      await host.shutdown(1_000);
    }
  });
});
