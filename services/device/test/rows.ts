/** Row factories and a throw catcher for the in-process (unit) tests: no database, no bus. */
import { DomainError } from "@unimatrix/service-kit/errors";
import type { DeviceRow, EnrollTokenRow, PlacementRow } from "../src/store/rows";

export const TENANT = "1111abcd-1ef0-4111-8111-11111111beef";
export const OTHER_TENANT = "2222abcd-2ef0-4222-8222-22222222beef";
export const USER = "3333abcd-3ef0-4333-8333-33333333beef";
export const CLIENT = "4444abcd-4ef0-4444-8444-44444444beef";
export const CLIENT2 = "5555abcd-5ef0-4555-8555-55555555beef";
export const DEVICE = "6666abcd-6ef0-4666-8666-66666666beef";
export const DEVICE2 = "7777abcd-7ef0-4777-8777-77777777beef";
export const NOW = new Date(Date.UTC(2026, 5, 1, 12, 0, 0));

/** A date `ms` milliseconds after NOW. */
export const at = (ms: number) => new Date(NOW.getTime() + ms);

/** An active, offline device of CLIENT in TENANT. */
export function deviceRow(over: Partial<DeviceRow> = {}): DeviceRow {
  return {
    id: DEVICE,
    tenant_id: TENANT,
    owner_subject_id: CLIENT,
    public_key: "abc",
    platform: "linux",
    display_name: "laptop",
    status: "active",
    revoked_reason: null,
    revoked_at: null,
    connection_generation: 0n,
    lease_expires_at: null,
    online: false,
    rev: 1n,
    enrolled_at: at(-60_000),
    updated_at: at(-60_000),
    enroll_token_id: "8888abcd-8ef0-4888-8888-88888888beef",
    ...over,
  };
}

/** A placement of "root-1" on DEVICE, owned by CLIENT, rev 3, no run. */
export function placementRow(over: Partial<PlacementRow> = {}): PlacementRow {
  return {
    tenant_id: TENANT,
    root_session_id: "root-1",
    device_id: DEVICE,
    owner_subject_id: CLIENT,
    rev: 3n,
    placed_at: at(-30_000),
    updated_at: at(-10_000),
    active_run_id: null,
    ...over,
  };
}

/** An unused enroll token of CLIENT, issued a minute ago, expiring in ten. */
export function tokenRow(over: Partial<EnrollTokenRow> = {}): EnrollTokenRow {
  return {
    id: "9999abcd-9ef0-4999-8999-99999999beef",
    tenant_id: TENANT,
    owner_subject_id: CLIENT,
    label: "",
    created_at: at(-60_000),
    expires_at: at(600_000),
    consumed_at: null,
    consumed_by_public_key: null,
    device_id: null,
    revoked_at: null,
    ...over,
  };
}

/** The domain error `fn` throws (fails the test when it returns or throws something else). */
export function refusal(fn: () => unknown): DomainError & { field?: string } {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error("expected a refusal, but the call returned");
}
