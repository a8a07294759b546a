import { create } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import { AppendEntryRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CreateRoleRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { DomainError } from "@unimatrix/service-kit/errors";
import { checkRequest } from "@unimatrix/service-kit/grpc";
import { validRequest } from "@unimatrix/service-kit/testing";
import { checkEntry } from "../src/rules/entry";
import { OffsetPages } from "../src/rules/paging";
import { name } from "../src/rules/request";
import { patchSection } from "../src/rules/sections";
import { taxonomy, taxonomyKinds } from "../src/rules/taxonomy";

/** The status code and message `fn` throws with (fails the test when it throws nothing). */
function failure(fn: () => unknown): { code: number; message: string } {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error("expected a DomainError, nothing was thrown");
}

const ID = "0f8fad5b-d9cb-469f-a165-70867728950e";

describe("text", () => {
  test("name: not only whitespace (the one text rule the contract cannot state)", () => {
    expect(name("name", " x ")).toBe(" x ");
    expect(failure(() => name("name", "   ")).message).toBe("name: is required");
  });

  test("the contract holds the rest: characters not bytes; NUL and control characters refused naming the field; tab and newline pass", () => {
    const role = (init: Record<string, string>) => () =>
      checkRequest(CreateRoleRequestSchema, create(CreateRoleRequestSchema, { cubeId: ID, name: "worker", ...init }));
    expect(role({ name: "😀".repeat(100) })).not.toThrow();
    expect(failure(role({ name: "x".repeat(101) })).message).toMatch(/^name: /);
    expect(failure(role({ name: "a\u0000b" })).message).toMatch(/^name: /);
    expect(failure(role({ shortDescription: "h\u0007" })).message).toMatch(/^short_description: /);
    expect(failure(role({ detailedDescription: "\u001b[31m" })).message).toMatch(/^detailed_description: /);
    expect(role({ detailedDescription: "line one\n\tline two\n" })).not.toThrow();
  });
});

describe("offset page tokens", () => {
  const pages = new OffsetPages("unit-test-key-0123456789abcdef", "ListRoles");
  const alice = { caller: "client:alice", filter: { cubeId: ID } };

  test("the empty token is the first page; a page with one row more than asked has a next token", () => {
    expect(pages.offset("", alice)).toBe(0);
    const first = pages.page([1, 2, 3], 0, 2, alice);
    expect(first.rows).toEqual([1, 2]);
    expect(first.next).not.toBe("");
    expect(pages.offset(first.next, alice)).toBe(2);
    const last = pages.page([3], 2, 2, alice);
    expect(last).toEqual({ rows: [3], next: "" });
  });

  test("another caller's token, other filters, another RPC's token or a tampered one is INVALID_ARGUMENT naming page_token", () => {
    const token = pages.page([1, 2, 3], 0, 2, alice).next;
    const refused = { code: status.INVALID_ARGUMENT, message: expect.stringMatching(/^page_token: /) };
    expect(failure(() => pages.offset(token, { ...alice, caller: "client:bob" }))).toEqual(refused);
    expect(failure(() => pages.offset(token, { ...alice, filter: { cubeId: "other" } }))).toEqual(refused);
    expect(failure(() => new OffsetPages("unit-test-key-0123456789abcdef", "ListDrones").offset(token, alice))).toEqual(
      refused,
    );
    const [body, mac] = token.split(".");
    const forged = `${Buffer.from("1000").toString("base64url")}.${mac}`;
    expect(forged).not.toBe(token);
    expect(failure(() => pages.offset(forged, alice))).toEqual(refused);
    expect(failure(() => pages.offset(`${body}.`, alice))).toEqual(refused);
    expect(failure(() => pages.offset("garbage", alice))).toEqual(refused);
  });
});

describe("AppendEntry checks", () => {
  const entry = { message: "hi", visibility: Visibility.BROADCAST, recipientDroneIds: [] as string[] };

  test("a broadcast and a direct entry pass", () => {
    expect(checkEntry(entry)).toEqual({
      message: "hi",
      visibility: "broadcast",
      recipientDroneIds: [],
      recipientLabels: [],
      kind: undefined,
      expectsReply: true,
      askHuman: false,
    });
    expect(checkEntry({ ...entry, visibility: Visibility.DIRECT, recipientDroneIds: [ID], kind: "plan" })).toEqual({
      message: "hi",
      visibility: "direct",
      recipientDroneIds: [ID],
      recipientLabels: [],
      kind: "plan",
      expectsReply: true,
      askHuman: false,
    });
  });

  test("a reply names its entry; expects_reply false is kept; a question may be DIRECT without recipients", () => {
    const reply = checkEntry({ ...entry, replyToEntryId: ID, expectsReply: false });
    expect(reply.replyTo).toEqual({ field: "reply_to_entry_id", id: ID });
    expect(checkEntry({ ...entry, replyToPosition: 7n }).replyTo).toEqual({ field: "reply_to_position", position: 7n });
    expect(() => checkEntry({ ...entry, replyToEntryId: ID, replyToPosition: 7n })).toThrow(
      /^reply_to_entry_id: set reply_to_entry_id or reply_to_position, not both$/,
    );
    const labelled = { ...entry, visibility: Visibility.DIRECT, recipientLabels: ["worker-1"] };
    expect(checkEntry(labelled).recipientLabels).toEqual(["worker-1"]);
    expect(() => checkEntry({ ...labelled, visibility: Visibility.BROADCAST })).toThrow(/^recipient_labels: /);
    expect(reply.expectsReply).toBe(false);
    expect(() => checkEntry({ ...entry, replyToEntryId: "X" })).toThrow(/reply_to_entry_id/);
    const question = checkEntry({ ...entry, visibility: Visibility.DIRECT, askHuman: true });
    expect(question).toMatchObject({ visibility: "direct", recipientDroneIds: [], askHuman: true });
    expect(() => checkEntry({ ...entry, visibility: Visibility.DIRECT })).toThrow(/recipient_drone_ids/);
  });

  test("the contract bounds the message in UTF-8 bytes and refuses NUL, naming message", () => {
    const append = (message: string) => () =>
      checkRequest(AppendEntryRequestSchema, { ...validRequest(AppendEntryRequestSchema), message });
    expect(append("é".repeat(16_384))).not.toThrow();
    expect(failure(append("x".repeat(32_769))).message).toMatch(/^message: /);
    expect(failure(append("nul\u0000")).message).toMatch(/^message: /);
  });

  test("each bad field is named, in the order message, visibility, recipients, kind", () => {
    const cases: [Parameters<typeof checkEntry>[0], string][] = [
      [{ ...entry, message: "  " }, "message: is required"],
      [{ ...entry, message: "  ", visibility: Visibility.UNSPECIFIED }, "message: is required"],
      [{ ...entry, visibility: Visibility.UNSPECIFIED }, "visibility: must be BROADCAST or DIRECT"],
      [{ ...entry, recipientDroneIds: [ID] }, "recipient_drone_ids: must be empty for BROADCAST"],
      [{ ...entry, visibility: Visibility.DIRECT }, "recipient_drone_ids: DIRECT needs 1-100 recipients"],
      [
        { ...entry, visibility: Visibility.DIRECT, recipientDroneIds: ["nope"] },
        "recipient_drone_ids: must be a canonical lowercase UUID",
      ],
      [
        { ...entry, visibility: Visibility.DIRECT, recipientDroneIds: [ID.toUpperCase()] },
        "recipient_drone_ids: must be a canonical lowercase UUID",
      ],
      [
        { ...entry, visibility: Visibility.DIRECT, recipientDroneIds: [ID, ID] },
        "recipient_drone_ids: must be distinct",
      ],
      [{ ...entry, kind: " " }, "kind: must be 1-64 characters"],
      [{ ...entry, kind: "k".repeat(65) }, "kind: must be 1-64 characters"],
    ];
    for (const [request, message] of cases)
      expect(failure(() => checkEntry(request))).toEqual({ code: status.INVALID_ARGUMENT, message });
  });

  test("at most 100 recipients", () => {
    const ids = (n: number) =>
      Array.from({ length: n }, (_, i) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`);
    expect(
      checkEntry({ ...entry, visibility: Visibility.DIRECT, recipientDroneIds: ids(100) }).recipientDroneIds,
    ).toHaveLength(100);
    expect(
      failure(() => checkEntry({ ...entry, visibility: Visibility.DIRECT, recipientDroneIds: ids(101) })).message,
    ).toBe("recipient_drone_ids: DIRECT needs 1-100 recipients");
  });
});

describe("taxonomy", () => {
  test("a taxonomy must be a JSON object", () => {
    expect(taxonomy("taxonomy_json", '{"kinds":[]}')).toBe('{"kinds":[]}');
    expect(failure(() => taxonomy("taxonomy_json", "[1]")).message).toBe("taxonomy_json: must be a JSON object");
    expect(failure(() => taxonomy("taxonomy_json", "{")).message).toBe("taxonomy_json: must be valid JSON");
  });

  test("kinds: a kinds array (strings or named objects), a kinds object's keys, else the top-level keys", () => {
    expect([...taxonomyKinds('{"kinds":["plan",{"name":"risk"},{"x":1},3]}')]).toEqual(["plan", "risk"]);
    expect([...taxonomyKinds('{"kinds":{"plan":{},"risk":{}}}')]).toEqual(["plan", "risk"]);
    expect([...taxonomyKinds('{"plan":{},"risk":1}')]).toEqual(["plan", "risk"]);
  });
});

describe("role description sections", () => {
  const doc = "intro\n\n## Duties\nbuild\n\n## Limits\nnone\n";

  test("add appends a section; adding an existing one is FAILED_PRECONDITION", () => {
    expect(patchSection(doc, "add", "Tools", "jest")).toBe(`${doc.replace(/\n+$/, "")}\n\n## Tools\njest\n`);
    expect(patchSection("", "add", "Tools", "")).toBe("## Tools\n");
    expect(failure(() => patchSection(doc, "add", "Duties", "x")).code).toBe(status.FAILED_PRECONDITION);
  });

  test("replace swaps a section's body; remove drops the heading and body; a missing section is FAILED_PRECONDITION", () => {
    expect(patchSection(doc, "replace", "Duties", "test\nship")).toBe(
      "intro\n\n## Duties\ntest\nship\n\n## Limits\nnone\n",
    );
    expect(patchSection(doc, "remove", "Duties", "")).toBe("intro\n\n## Limits\nnone\n");
    expect(failure(() => patchSection(doc, "remove", "Nope", "")).code).toBe(status.FAILED_PRECONDITION);
  });
});
