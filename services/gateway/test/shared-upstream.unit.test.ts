import { Metadata, status } from "@grpc/grpc-js";
import { eventually } from "@unimatrix/service-kit/testing";
import type { Step } from "../src/follow";
import { MEMBER_MAX_QUEUE, type SharedKind, type SharedMember } from "../src/shared-member";
import { SharedUpstreams } from "../src/shared-upstream";

/** A toy upstream message: an entry at a cursor, a ready, a going-away, a final close, access news and revocation. */
type Msg =
  | { kind: "entry"; cursor: string }
  | { kind: "ready"; cursor: string }
  | { kind: "away"; cursor: string }
  | { kind: "final" }
  | { kind: "slow"; cursor: string | undefined }
  | { kind: "news"; subjects: string[] }
  | { kind: "revoked"; reason: string };

const kind: SharedKind<Msg> = {
  step: (m): Step => {
    switch (m.kind) {
      case "entry":
        return { cursor: m.cursor };
      case "ready":
        return { start: m.cursor };
      case "away":
        return { goingAway: true, cursor: m.cursor };
      case "news":
        return {};
      default:
        return { final: true };
    }
  },
  isReady: (m) => m.kind === "ready",
  readyAt: (cursor) => ({ kind: "ready", cursor }),
  tooSlowAt: (cursor) => ({ kind: "slow", cursor }),
  revokedFor: (reason) => ({ kind: "revoked", reason }),
  accessNews: (m) => (m.kind === "news" ? m.subjects : undefined),
  isRevoked: (m) => m.kind === "revoked",
};

/** A refusal as grpc-js reports it (a ServiceError: code, details, metadata). */
const denied = (code: number) =>
  Object.assign(new Error("no access"), { code, details: "no access", metadata: new Metadata() });

/**
 * A member of credential `credential` reading `up`; `opened` records who opened the upstream and
 * after what; `checks` records each check (credential and freshness); `allow` decides them.
 */
function memberOf(
  up: ReturnType<typeof fakeUpstream>,
  credential: string,
  log: { opened: string[]; checks: string[] },
  allow: () => Promise<void> = async () => {},
): SharedMember<Msg> {
  return {
    credential,
    subjects: [credential],
    open: (after, signal) => {
      log.opened.push(`${credential}@${after ?? "head"}`);
      return up.open(after, signal);
    },
    check: (fresh) => {
      log.checks.push(`${credential}${fresh ? "!" : ""}`);
      return allow();
    },
  };
}

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
    const log = { opened: [] as string[], checks: [] as string[] };
    const a = new AbortController();
    const b = new AbortController();
    const first = reader(shared.join("k", kind, memberOf(up, "c", log), a.signal));
    up.send({ kind: "ready", cursor: "0" });
    up.send({ kind: "entry", cursor: "1" });
    await eventually(() => first.got.length === 2, "first two");
    const late = reader(shared.join("k", kind, memberOf(up, "c", log), b.signal));
    await eventually(() => shared.stats().members === 2, "the late joiner admitted");
    expect(shared.stats()).toEqual({ upstreams: 1, members: 2, opened: 1 });
    // The opener's open is its check; a joiner of a credential already here is vouched for by it.
    expect(log.checks).toEqual([]);
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
    const log = { opened: [] as string[], checks: [] as string[] };
    const fast = reader(shared.join("k", kind, memberOf(up, "c", log), new AbortController().signal));
    const slow = reader(shared.join("k", kind, memberOf(up, "c", log), new AbortController().signal));
    await eventually(() => shared.stats().members === 2, "both admitted");
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

  test("a refusal of the reader reaches it alone; the others are asked and read on as one of them, after the position", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const log = { opened: [] as string[], checks: [] as string[] };
    const first = shared.join("k", kind, memberOf(up, "a", log), new AbortController().signal);
    const refused = (async () => {
      try {
        for await (const _ of first) {
          // the ready and the entry
        }
        return "ended";
      } catch (error) {
        return (error as { code: number }).code;
      }
    })();
    const other = reader(shared.join("k", kind, memberOf(up, "b", log), new AbortController().signal));
    await eventually(() => shared.stats().members === 2, "b admitted");
    up.send({ kind: "ready", cursor: "0" });
    up.send({ kind: "entry", cursor: "1" });
    await eventually(() => other.got.length === 2, "b got the ready and the entry");
    up.send(denied(status.NOT_FOUND));
    expect(await refused).toBe(status.NOT_FOUND);
    await eventually(() => log.opened.length === 2, "re-opened as b");
    expect(log.opened).toEqual(["a@head", "b@1"]);
    expect(log.checks).toEqual(["b", "b!"]);
    up.send({ kind: "ready", cursor: "1" });
    up.send({ kind: "entry", cursor: "2" });
    await eventually(() => other.got.filter((m) => m.kind === "entry").length === 2, "b's second entry");
    expect(other.got.filter((m) => m.kind === "entry")).toEqual([
      { kind: "entry", cursor: "1" },
      { kind: "entry", cursor: "2" },
    ]);
    expect(shared.stats()).toMatchObject({ upstreams: 1, members: 1, opened: 1 });
    up.send({ kind: "final" });
    await other.done;
    expect(shared.stats().upstreams).toBe(0);
  });

  test("the reader's access_revoked reaches it alone, and its credential's other members lose theirs too", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const log = { opened: [] as string[], checks: [] as string[] };
    let aAllowed = true;
    const allowA = async () => {
      if (!aAllowed) throw denied(status.UNAUTHENTICATED);
    };
    const a1 = reader(shared.join("k", kind, memberOf(up, "a", log, allowA), new AbortController().signal));
    const a2 = reader(shared.join("k", kind, memberOf(up, "a", log, allowA), new AbortController().signal));
    const b = reader(shared.join("k", kind, memberOf(up, "b", log), new AbortController().signal));
    await eventually(() => shared.stats().members === 3, "all admitted");
    up.send({ kind: "ready", cursor: "0" });
    up.send({ kind: "entry", cursor: "1" });
    await eventually(() => b.got.length === 2, "b's entry");
    aAllowed = false;
    up.send({ kind: "revoked", reason: "client revoked" });
    await Promise.all([a1.done, a2.done]);
    expect(a1.got.at(-1)).toEqual({ kind: "revoked", reason: "client revoked" });
    expect(a2.got.at(-1)).toEqual({ kind: "revoked", reason: "access to this stream was removed (UNAUTHENTICATED)" });
    await eventually(() => log.opened.length === 2, "re-opened as b");
    expect(log.opened).toEqual(["a@head", "b@1"]);
    expect(b.got.some((m) => m.kind === "revoked")).toBe(false);
    expect(shared.stats()).toMatchObject({ upstreams: 1, members: 1 });
  });

  test("access news holds the stream until every other credential is asked afresh; one that lost access is told so", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const log = { opened: [] as string[], checks: [] as string[] };
    let answerB: () => void = () => {};
    let newsArrived = false;
    const slowB = () => (newsArrived ? new Promise<void>((resolve) => (answerB = resolve)) : Promise.resolve());
    let cAllowed = true;
    const allowC = async () => {
      if (!cAllowed) throw denied(status.PERMISSION_DENIED);
    };
    const a = reader(shared.join("k", kind, memberOf(up, "a", log), new AbortController().signal));
    const b = reader(shared.join("k", kind, memberOf(up, "b", log, slowB), new AbortController().signal));
    const c = reader(shared.join("k", kind, memberOf(up, "c", log, allowC), new AbortController().signal));
    await eventually(() => shared.stats().members === 3, "all admitted");
    up.send({ kind: "ready", cursor: "0" });
    await eventually(() => c.got.length === 1, "c's ready");
    newsArrived = true;
    cAllowed = false;
    up.send({ kind: "news", subjects: [] });
    up.send({ kind: "entry", cursor: "1" });
    await c.done;
    expect(c.got).toEqual([
      { kind: "ready", cursor: "0" },
      { kind: "revoked", reason: "access to this stream was removed (PERMISSION_DENIED)" },
    ]);
    // b's answer has not come yet: nothing after the news was passed on.
    expect(a.got).toEqual([{ kind: "ready", cursor: "0" }]);
    answerB();
    await eventually(() => a.got.length === 2 && b.got.length === 2, "the entry after the answers");
    expect(b.got.at(-1)).toEqual({ kind: "entry", cursor: "1" });
    // The reader's own credential is the upstream's to check; the news is never passed on.
    expect(log.checks.filter((x) => x.endsWith("!")).sort()).toEqual(["b!", "c!"]);
    expect([...a.got, ...b.got].some((m) => m.kind === "news")).toBe(false);
  });

  test("news naming some subjects checks only the members it names", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const log = { opened: [] as string[], checks: [] as string[] };
    const a = reader(shared.join("k", kind, memberOf(up, "a", log), new AbortController().signal));
    for (const name of ["b", "c", "d"])
      reader(shared.join("k", kind, memberOf(up, name, log), new AbortController().signal));
    await eventually(() => shared.stats().members === 4, "all admitted");
    up.send({ kind: "ready", cursor: "0" });
    up.send({ kind: "news", subjects: ["c", "somebody-else"] });
    up.send({ kind: "news", subjects: ["nobody-here"] });
    up.send({ kind: "entry", cursor: "1" });
    await eventually(() => a.got.length === 2, "the entry after the news");
    expect(log.checks.filter((x) => x.endsWith("!"))).toEqual(["c!"]);
  });

  test("joiners of one credential arriving together share one check", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const log = { opened: [] as string[], checks: [] as string[] };
    reader(shared.join("k", kind, memberOf(up, "a", log), new AbortController().signal));
    for (let i = 0; i < 5; i++) reader(shared.join("k", kind, memberOf(up, "b", log), new AbortController().signal));
    await eventually(() => shared.stats().members === 6, "all admitted");
    expect(log.checks).toEqual(["b"]);
  });

  test("a joiner is admitted after its own check; a refused joiner fails alone", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const log = { opened: [] as string[], checks: [] as string[] };
    const a = reader(shared.join("k", kind, memberOf(up, "a", log), new AbortController().signal));
    up.send({ kind: "ready", cursor: "0" });
    await eventually(() => a.got.length === 1, "a's ready");
    const stranger = shared.join(
      "k",
      kind,
      memberOf(up, "x", log, async () => {
        throw denied(status.PERMISSION_DENIED);
      }),
      new AbortController().signal,
    );
    const outcome = (async () => {
      try {
        for await (const { message } of stranger) return `got ${message.kind}`;
        return "ended";
      } catch (error) {
        return (error as { code: number }).code;
      }
    })();
    expect(await outcome).toBe(status.PERMISSION_DENIED);
    up.send({ kind: "entry", cursor: "1" });
    await eventually(() => a.got.length === 2, "a reads on");
    expect(shared.stats()).toMatchObject({ upstreams: 1, members: 1, opened: 1 });
    expect(log.opened).toEqual(["a@head"]);
  });

  test("when the reader leaves, the upstream is re-opened as another member after the position, with no gap or repeat", async () => {
    const shared = new SharedUpstreams();
    const up = fakeUpstream();
    const log = { opened: [] as string[], checks: [] as string[] };
    const leaving = new AbortController();
    reader(shared.join("k", kind, memberOf(up, "a", log), leaving.signal));
    const b = reader(shared.join("k", kind, memberOf(up, "b", log), new AbortController().signal));
    await eventually(() => shared.stats().members === 2, "b admitted");
    up.send({ kind: "ready", cursor: "0" });
    up.send({ kind: "entry", cursor: "1" });
    await eventually(() => b.got.length === 2, "b's entry");
    leaving.abort();
    await eventually(() => log.opened.length === 2, "re-opened as b");
    expect(log.opened).toEqual(["a@head", "b@1"]);
    up.send({ kind: "ready", cursor: "1" });
    up.send({ kind: "entry", cursor: "2" });
    await eventually(() => b.got.filter((m) => m.kind === "entry").length === 2, "b's second entry");
    expect(b.got.filter((m) => m.kind === "entry").map((m) => (m as { cursor: string }).cursor)).toEqual(["1", "2"]);
    expect(shared.stats()).toMatchObject({ upstreams: 1, members: 1, opened: 1 });
  });
});
