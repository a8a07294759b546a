// How a host's streams reach the client: responses written at once beside the handler's iterator
// (`CallContext.sendNow`), and a kit client's receive window, which lets many streams of one
// connection run ahead of their reader.
import { create } from "@bufbuild/protobuf";
import { Int32ValueSchema, StringValueSchema } from "@bufbuild/protobuf/wkt";
import { type CallContext, FLOW_CONTROL_WINDOW } from "@unimatrix/service-kit/grpc";
import { ServiceMetrics } from "@unimatrix/service-kit/observe";
import { type ObservedEcho, series, startObservedEcho } from "./fixtures/observed-echo";

type Str = { value: string };
type Num = { value: number };

const CHUNK = 16 * 1024;
/** Responses a Pour call writes: 1 MiB, sixteen times HTTP/2's default window of 64 KiB. */
const POURED = 64;

describe("stream writes", () => {
  const metrics = new ServiceMetrics("kit-stream-test");
  let echo: ObservedEcho;
  let client: ObservedEcho["client"];
  /** How many responses each Count call wrote with `sendNow` before it was refused. */
  const writtenNow: number[] = [];
  let poured: () => void;
  const pouredAll = new Promise<void>((resolve) => {
    poured = resolve;
  });

  beforeAll(async () => {
    echo = await startObservedEcho(metrics, {
      async say(_request: Str, ctx: CallContext) {
        return { value: `sendNow: ${typeof ctx.sendNow}` };
      },
      async *count(_request: Num, ctx: CallContext) {
        yield { value: 1 };
        let now = 0;
        while (now < 10_000 && ctx.sendNow?.({ value: 100 + now })) now++;
        writtenNow.push(now);
        yield { value: 2 };
      },
      async *pour() {
        for (let i = 0; i < POURED; i++) yield { value: "x".repeat(CHUNK) };
        poured();
      },
    });
    client = echo.client;
  });

  afterAll(() => echo.stop());

  it("writes a response at once between two the iterator yields, and refuses once the client has not drained", async () => {
    const got: number[] = [];
    for await (const reply of client.count!(create(Int32ValueSchema, { value: 0 })) as AsyncIterable<Num>)
      got.push(reply.value);
    const now = writtenNow[0] as number;
    // Written in one turn, nothing drains: the call's buffer fills and sendNow says no.
    expect(now).toBeGreaterThan(0);
    expect(now).toBeLessThan(10_000);
    expect(got).toEqual([1, ...Array.from({ length: now }, (_, i) => 100 + i), 2]);
    // Counted as stream messages like the yielded ones; a unary call has no sendNow.
    expect(series(await metrics.registry.metrics(), "grpc_server_msg_sent_total", "Count")).toBe(now + 2);
    expect(((await client.say!(create(StringValueSchema, { value: "" }))) as Str).value).toBe("sendNow: undefined");
  });

  it("keeps another stream of the connection flowing while one reader leaves most of 1 MiB unread", async () => {
    expect(FLOW_CONTROL_WINDOW).toBeGreaterThanOrEqual(POURED * (CHUNK + 64));
    const waiting = (client.pour!(create(StringValueSchema, { value: "" })) as AsyncIterable<Str>)[
      Symbol.asyncIterator
    ]();
    // The reader takes one response and stops: grpc-js pauses the stream, its data stays unread.
    let bytes = ((await waiting.next()).value as Str).value.length;
    await pouredAll;
    // Every stream of a client shares one connection and its receive window: at HTTP/2's default
    // of 64 KiB the unread data fills it, and nothing more reaches this client (the test times out).
    const got: number[] = [];
    for await (const reply of client.count!(create(Int32ValueSchema, { value: 0 })) as AsyncIterable<Num>)
      got.push(reply.value);
    expect(got.at(0)).toBe(1);
    expect(got.at(-1)).toBe(2);
    for (let next = await waiting.next(); !next.done; next = await waiting.next()) bytes += next.value.value.length;
    expect(bytes).toBe(POURED * CHUNK);
  });
});
