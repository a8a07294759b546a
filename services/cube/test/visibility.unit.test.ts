import { randomUUID } from "node:crypto";
import { isParticipant, MANAGE, READ, WRITE } from "../src/rules/access";
import { type Viewer, type VisibilityFacts, viewerOf, visibleTo } from "../src/rules/visibility";

const me = randomUUID();
const other = randomUUID();
const third = randomUUID();

const broadcast = (author: string | null = other): VisibilityFacts => ({
  itemType: "entry",
  visibility: "broadcast",
  authorDroneId: author,
  recipientDroneIds: [],
});
const direct = (author: string | null, recipients: string[]): VisibilityFacts => ({
  itemType: "entry",
  visibility: "direct",
  authorDroneId: author,
  recipientDroneIds: recipients,
});
const notification = (recipient: string): VisibilityFacts => ({
  itemType: "notification",
  visibility: null,
  authorDroneId: null,
  recipientDroneIds: [recipient],
});

const drone = (access: number, receivesAllDirect = false): Viewer =>
  viewerOf({ access, drone: { id: me, receivesAllDirect } });

describe("posture", () => {
  test("a drone session with a grant below WRITE reads as an observer, at WRITE or above as a participant", () => {
    expect(drone(READ)).toEqual({ kind: "drone", droneId: me, participant: false, allDirect: false });
    expect(drone(WRITE)).toEqual({ kind: "drone", droneId: me, participant: true, allDirect: false });
    expect(drone(MANAGE, true)).toEqual({ kind: "drone", droneId: me, participant: true, allDirect: true });
  });

  test("users and clients (no drone) read as principals whatever their access", () => {
    expect(viewerOf({ access: MANAGE })).toEqual({ kind: "principal" });
    expect(viewerOf({ access: READ })).toEqual({ kind: "principal" });
  });

  test("a listed drone is a participant only when not evicted, its client not revoked and its grant ≥ WRITE", () => {
    const ok = { evicted: false, clientRevoked: false, access: WRITE };
    expect(isParticipant(ok)).toBe(true);
    expect(isParticipant({ ...ok, access: MANAGE })).toBe(true);
    expect(isParticipant({ ...ok, access: READ })).toBe(false);
    expect(isParticipant({ ...ok, access: 0 })).toBe(false);
    expect(isParticipant({ ...ok, evicted: true })).toBe(false);
    expect(isParticipant({ ...ok, clientRevoked: true })).toBe(false);
  });
});

describe("visibility", () => {
  test("an observer sees broadcast entries, not even direct entries it wrote or that are addressed to it", () => {
    const observer = drone(READ);
    expect(visibleTo(observer, broadcast())).toBe(true);
    expect(visibleTo(observer, broadcast(me))).toBe(true);
    expect(visibleTo(observer, direct(other, [me]))).toBe(false);
    expect(visibleTo(observer, direct(me, [other]))).toBe(false);
    expect(visibleTo(drone(READ, true), direct(other, [third]))).toBe(false);
  });

  test("a drone sees the notifications addressed to it whatever its posture (an author lowered to READ still gets its ACKs)", () => {
    expect(visibleTo(drone(READ), notification(me))).toBe(true);
    expect(visibleTo(drone(READ), notification(other))).toBe(false);
  });

  test("a participant also sees its own direct posts and direct entries addressed to it, not others'", () => {
    const participant = drone(WRITE);
    expect(visibleTo(participant, broadcast())).toBe(true);
    expect(visibleTo(participant, direct(me, [other]))).toBe(true);
    expect(visibleTo(participant, direct(other, [third, me]))).toBe(true);
    expect(visibleTo(participant, direct(other, [third]))).toBe(false);
  });

  test("a participant whose role receives all direct entries sees every direct entry", () => {
    expect(visibleTo(drone(WRITE, true), direct(other, [third]))).toBe(true);
  });

  test("a drone sees only the notifications addressed to it", () => {
    expect(visibleTo(drone(WRITE), notification(me))).toBe(true);
    expect(visibleTo(drone(WRITE), notification(other))).toBe(false);
  });

  test("users and clients see every entry and no notification", () => {
    const principal: Viewer = { kind: "principal" };
    expect(visibleTo(principal, broadcast())).toBe(true);
    expect(visibleTo(principal, direct(other, [third]))).toBe(true);
    expect(visibleTo(principal, direct(null, [third]))).toBe(true);
    expect(visibleTo(principal, notification(me))).toBe(false);
  });
});
