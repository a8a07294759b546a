import { create } from "@bufbuild/protobuf";
import { CreateCubeRequestSchema } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { checkRequest } from "@unimatrix/service-kit/grpc";
import { localToIso } from "../web/src/audit-page";
import { taxonomyProblem } from "../web/src/cubes-page";
import { fieldOf } from "../web/src/forms";
import { sections } from "../web/src/role-editor";
import { sessionState } from "../web/src/seats";

/** The console's pure rules, in process: no browser, no services. */
describe("console: rules", () => {
  it("splits a Connect message naming a field, and leaves other messages whole", () => {
    expect(fieldOf("taxonomy_json: must be valid JSON")).toEqual({
      field: "taxonomy_json",
      reason: "must be valid JSON",
    });
    expect(fieldOf("end_time: must not be before start_time")).toEqual({
      field: "end_time",
      reason: "must not be before start_time",
    });
    expect(fieldOf("a role with that name exists in the cube")).toBeUndefined();
    expect(fieldOf("Name: capitalised is not a request field")).toBeUndefined();
  });

  it("checks a taxonomy as the admin types, with the cube service's messages", () => {
    // The same texts the cube service answers with (its own tests pin them there).
    for (const text of ['{"kinds": ["status"]}', "{}", '{"kinds": {"status": {}}}', '{"status": 1}']) {
      expect(taxonomyProblem(text)).toBeUndefined();
    }
    for (const text of ["[1]", "null", "3", '"text"']) expect(taxonomyProblem(text)).toBe("must be a JSON object");
    expect(taxonomyProblem('{"kinds": [')).toMatch(/^must be valid JSON \(/);
    expect(taxonomyProblem("")).toBeUndefined();
    // Size and control characters are the contract's rules now (checked once in the kit for
    // every RPC): the console refuses what the contract refuses, naming the same field.
    const contract = (text: string) => {
      const request = create(CreateCubeRequestSchema, {
        requestKey: "8f0e2b1c-3d4a-4b5c-9d6e-7f8091a2b3c4",
        name: "c",
        directive: "d",
        taxonomyJson: text,
      });
      try {
        checkRequest(CreateCubeRequestSchema, request);
        return undefined;
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(contract('{"kinds": ["status"]}')).toBeUndefined();
    for (const text of [`{"a": "${"x".repeat(100_000)}"}`, `{"a": "\u0007"}`]) {
      expect(taxonomyProblem(text)).toMatch(/^must (be at most 100,000 bytes|not contain control characters)$/);
      expect(contract(text)).toMatch(/^taxonomy_json: /);
    }
  });

  it("derives a drone's sessions' state from the drone and its client", () => {
    const drone = { id: "d", lastSeenAt: "2026-12-01T10:00:00Z" };
    const client = { id: "c", name: "c", credentialIssuedAt: "2026-12-01T09:00:00Z" };
    expect(sessionState({ ...drone, live: true }, client)).toEqual({ state: "live", why: "a session is open" });
    expect(sessionState({ ...drone, live: true, evictedAt: "2026-12-01T11:00:00Z" }, client)).toEqual({
      state: "revoked",
      why: "evicted",
    });
    expect(sessionState(drone, { ...client, revokedAt: "2026-12-01T11:00:00Z" })).toEqual({
      state: "revoked",
      why: "client revoked",
    });
    expect(sessionState(drone, { ...client, credentialIssuedAt: "2026-12-01T10:00:01Z" })).toEqual({
      state: "revoked",
      why: "credential rotated",
    });
    expect(sessionState(drone, client)).toEqual({ state: "expired", why: "no session open" });
    expect(sessionState(drone, undefined)).toEqual({ state: "expired", why: "no session open" });
  });

  it("lists a role's sections and turns datetime-local text into an instant", () => {
    expect(sections("intro\n## Duties\nx\n## Checks  \ny\n### not a section")).toEqual(["Duties", "Checks"]);
    expect(localToIso("")).toBeUndefined();
    expect(localToIso("garbage")).toBeUndefined();
    expect(localToIso("2026-01-02T03:04:05")).toBe(new Date(2026, 0, 2, 3, 4, 5).toISOString());
  });
});
