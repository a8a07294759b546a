import { appendFileSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { backoffDelay, Spool } from "@unimatrix/machine";

const notice = (id: string, droneId = "d1") => ({
  id,
  cubeId: "c1",
  droneId,
  droneLabel: "worker-1",
  entryId: "e1",
  text: `[DIRECT] queen-1: ${id}`,
});

describe("the notice spool", () => {
  it("dedups by id, keeps handed ids, and survives a reopen (what a kill -9 leaves is what was fsynced)", () => {
    const dir = mkdtempSync(join(tmpdir(), "umx-spool-"));
    const spool = Spool.open(dir);
    expect(spool.add(notice("n1"))).toBe("new");
    expect(spool.add(notice("n1"))).toBe("pending");
    expect(spool.add(notice("n2", "d2"))).toBe("new");
    expect(spool.markHanded(["n1", "unknown"], "claude-code:s1")).toEqual(["n1"]);
    expect(spool.markHanded(["n1"], "claude-code:s1")).toEqual([]);
    spool.putSession({ harness: "claude-code", session: "s1", droneId: "d1", cubeId: "c1", expiresAt: 0 });
    // No close: the process dies here.
    const reopened = Spool.open(dir);
    expect(reopened.add(notice("n1"))).toBe("handed");
    expect(reopened.pendingFor("d1")).toEqual([]);
    expect(reopened.pendingFor("d2").map((n) => n.id)).toEqual(["n2"]);
    expect(reopened.session("claude-code", "s1")?.droneId).toBe("d1");
    expect(statSync(join(dir, "journal.ndjson")).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it("ignores a torn last line (a crash mid-append: that change never counted)", () => {
    const dir = mkdtempSync(join(tmpdir(), "umx-spool-"));
    const spool = Spool.open(dir);
    spool.add(notice("n1"));
    spool.close();
    appendFileSync(join(dir, "journal.ndjson"), '{"t":"handed","id":"n1","sess');
    const reopened = Spool.open(dir);
    expect(reopened.pendingFor("d1").map((n) => n.id)).toEqual(["n1"]);
    // Reopening compacted the journal: the torn line is gone.
    expect(readFileSync(join(dir, "journal.ndjson"), "utf8").trim().split("\n")).toHaveLength(1);
  });

  it("forgets expired sessions when compacting, and sessions it is told to forget", () => {
    let now = 1_000;
    const dir = mkdtempSync(join(tmpdir(), "umx-spool-"));
    const spool = Spool.open(dir, () => now);
    spool.putSession({ harness: "h", session: "old", droneId: "d1", cubeId: "c", expiresAt: 2_000 });
    spool.putSession({ harness: "h", session: "gone", droneId: "d1", cubeId: "c", expiresAt: 0 });
    spool.forgetSession("h", "gone");
    now = 3_000;
    spool.compact();
    expect(spool.sessions()).toEqual([]);
  });
});

describe("reconnect backoff", () => {
  it("doubles its ceiling per attempt up to the cap, and jitters within the upper half", () => {
    const low = () => 0;
    const high = () => 0.999999;
    expect([0, 1, 2, 3].map((a) => backoffDelay(a, { baseMs: 100, random: high }))).toEqual([100, 200, 400, 800]);
    expect([0, 1, 2, 3].map((a) => backoffDelay(a, { baseMs: 100, random: low }))).toEqual([50, 100, 200, 400]);
    expect(backoffDelay(50, { baseMs: 100, maxMs: 5_000, random: high })).toBe(5_000);
    expect(backoffDelay(50, { baseMs: 100, maxMs: 5_000, random: low })).toBe(2_500);
  });
});
