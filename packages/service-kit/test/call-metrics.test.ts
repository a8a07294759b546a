import { create } from "@bufbuild/protobuf";
import { Int32ValueSchema, StringValueSchema } from "@bufbuild/protobuf/wkt";
import type { CallContext } from "@unimatrix/service-kit/grpc";
import { ServiceMetrics } from "@unimatrix/service-kit/observe";
import { type ObservedEcho, series, startObservedEcho } from "./fixtures/observed-echo";

type Str = { value: string };
type Num = { value: number };

describe("the RED series of a host's calls", () => {
  const metrics = new ServiceMetrics("kit-test");
  let echo: ObservedEcho;
  let client: ObservedEcho["client"];

  beforeAll(async () => {
    echo = await startObservedEcho(metrics, {
      async say(request: Str) {
        return { value: request.value };
      },
      async *count(request: Num, _ctx: CallContext) {
        for (let i = 1; i <= request.value; i++) yield { value: i };
      },
      async *chat(requests: AsyncIterable<Str>) {
        for await (const request of requests) yield { value: request.value };
      },
    });
    client = echo.client;
  });

  afterAll(() => echo.stop());

  const count = async (n: number) => {
    const got: number[] = [];
    for await (const reply of client.count!(create(Int32ValueSchema, { value: n })) as AsyncIterable<Num>)
      got.push(reply.value);
    expect(got).toHaveLength(n);
  };

  it("counts every stream message once per scrape, whether it was sent before or after the last scrape", async () => {
    await client.say!(create(StringValueSchema, { value: "unary" }));
    await count(5);
    await count(3);
    const first = await metrics.registry.metrics();
    expect(series(first, "grpc_server_msg_sent_total", "Count")).toBe(8);
    // A unary call sends no stream message; the series of a method with none is not made up.
    expect(series(first, "grpc_server_msg_sent_total", "Say")).toBeUndefined();
    expect(series(first, "grpc_server_handled_total", "Count")).toBe(2);
    // A second scrape with nothing new reads the same value (the tally was moved, not kept as well).
    expect(series(await metrics.registry.metrics(), "grpc_server_msg_sent_total", "Count")).toBe(8);
    await count(4);
    expect(series(await metrics.registry.metrics(), "grpc_server_msg_sent_total", "Count")).toBe(12);
  });
});
