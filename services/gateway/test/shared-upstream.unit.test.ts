import { status } from "@grpc/grpc-js";
import { eventually } from "@unimatrix/service-kit/testing";
import type { Step } from "../src/follow";
import { MEMBER_MAX_QUEUE, type SharedKind, SharedUpstreams } from "../src/shared-upstream";

/** A toy upstream message: an entry at a cursor, a ready, a going-away, a final close. */
type Msg =
  | { kind: "entry"; cursor: string }
  | { kind: "ready"; cursor: string }
  | { kind: "away"; cursor: string }
  | { kind: "final" }
  | { kind: "slow"; cursor: string | undefined };

const kind: SharedKind<Msg> = {
  step: (m): Step => {
    switch (m.kind) {
      case "entry":
        return { cursor: m.cursor };
      case "ready":
        return { start: m.cursor };
      case "away":
        return { goingAway: true, cursor: m.cursor };
      default:
        return { final: true };
    }
  },
  isReady: (m) => m.kind === "ready",
  readyAt: (cursor) => ({ kind: "ready", cursor }),
  tooSlowAt: (cursor) => ({ kind: "slow", cursor }),
};

/** An upstream the test feeds by hand; each open is recorded with the cursor it resumed after. */
function fakeUpstream() {
  const opens: (string | undefined)[] = [];
  let push: (m: Msg | Error) => void = () => {};
  const open = (after: string | undefined, signal: AbortSignal) => {
    opens.push(after);
    const queue: (Msg | Error)[] = [];
    let wake: (() => void) | undefined;
    push = (m) => {
      queue.push(m);
      wake?.();
    };
    signal.addEventListener("abort", () => wake?.());
    return (async function* () {
      for (;;) {
        const next = queue.shift();
        if (next instanceof Error) throw next;
        if (next) {
          yield next;
          continue;
        }
        if (signal.aborted) return;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    })();
  };
  return { opens, open, send: (m: Msg | Error) => push(m) };
}

/** Reads a member into an array in the background; `pause` stops it reading (a slow browser). */
function reader(iterable: AsyncIterable<{ message: Msg }>) {
  const got: Msg[] = [];
  let paused = false;
  let resume: () => void = () => {};
  const done = (async () => {
    for await (const { message } of iterable) {
      got.push(message);
      while (paused) await new Promise<void>((r) => (resume = r));
    }
  })();
  return {
    got,
    done,
    pause: () => {
      paused = true;
    },
    unpause: () => {
      paused = false;
      resume();
    },
  };
}

describe("SharedUpstreams", () => {
  test("one upstream per key; a late joiner starts with a ready at the shared position; failover resumes once for all", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const a = new AbortController();
    const b = new AbortController();
    const first = reader(shared.join("k", kind, up.open, a.signal));
    up.send({ kind: "ready", cursor: "0" });
    up.send({ kind: "entry", cursor: "1" });
    await eventually(() => first.got.length === 2, "first two");
    const late = reader(shared.join("k", kind, up.open, b.signal));
    expect(shared.stats()).toEqual({ upstreams: 1, members: 2, opened: 1 });
    up.send({ kind: "away", cursor: "1" });
    await eventually(() => up.opens.length === 2, "the re-open", 3_000);
    expect(up.opens).toEqual([undefined, "1"]);
    up.send({ kind: "ready", cursor: "1" });
    up.send({ kind: "entry", cursor: "2" });
    await eventually(() => late.got.some((m) => m.kind === "entry"), "the late joiner's entry");
    expect(first.got.filter((m) => m.kind === "entry")).toEqual([
      { kind: "entry", cursor: "1" },
      { kind: "entry", cursor: "2" },
    ]);
    expect(late.got[0]).toEqual({ kind: "ready", cursor: "1" });
    expect(late.got.filter((m) => m.kind === "entry")).toEqual([{ kind: "entry", cursor: "2" }]);
    a.abort();
    b.abort();
    await Promise.all([first.done, late.done]);
    expect(shared.stats()).toMatchObject({ upstreams: 0, members: 0 });
  });

  test("a member past the queue bound is closed at its last cursor; the others keep every message", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const fast = reader(shared.join("k", kind, up.open, new AbortController().signal));
    const slow = reader(shared.join("k", kind, up.open, new AbortController().signal));
    up.send({ kind: "ready", cursor: "0" });
    up.send({ kind: "entry", cursor: "1" });
    await eventually(() => slow.got.length === 2, "slow got the first entry");
    slow.pause();
    const total = MEMBER_MAX_QUEUE + 10;
    for (let i = 2; i < total; i++) up.send({ kind: "entry", cursor: String(i) });
    await eventually(() => fast.got.length === total, "fast got everything");
    slow.unpause();
    await slow.done;
    // Closed at the last entry it was handed, and nothing after it.
    const handed = slow.got.filter((m) => m.kind === "entry").at(-1) as { cursor: string };
    expect(slow.got.at(-1)).toEqual({ kind: "slow", cursor: handed.cursor });
    expect(slow.got.filter((m) => m.kind === "slow")).toHaveLength(1);
    expect(Number(handed.cursor)).toBeLessThan(total - 1);
    expect(shared.stats().members).toBe(1);
    up.send({ kind: "final" });
    await fast.done;
    expect(fast.got.at(-1)).toEqual({ kind: "final" });
    expect(shared.stats().upstreams).toBe(0);
  });

  test("an error that is not going-away reaches every member; the next joiner opens a new upstream", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const members = [0, 1].map(() => shared.join("k", kind, up.open, new AbortController().signal));
    const failures = members.map(async (m) => {
      try {
        for await (const _ of m) {
          // nothing arrives before the refusal
        }
        return "ended";
      } catch (error) {
        return (error as { code: number }).code;
      }
    });
    up.send(Object.assign(new Error("no access"), { code: status.NOT_FOUND }));
    expect(await Promise.all(failures)).toEqual([status.NOT_FOUND, status.NOT_FOUND]);
    expect(shared.stats().upstreams).toBe(0);
    const again = new AbortController();
    shared.join("k", kind, up.open, again.signal);
    expect(shared.stats()).toMatchObject({ upstreams: 1, opened: 2 });
    again.abort();
  });
});
