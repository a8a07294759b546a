import type { Clock } from "@unimatrix/service-kit/clock";
import type { NotePublisher } from "./live/notes";
import type { DevicePageTokens } from "./rules/paging";
import type { Db } from "./store/rows";

/** What every handler of the device service is built from. */
export interface DeviceDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly publisher: NotePublisher;
  /** The sealed page tokens of the three lists. */
  readonly pages: DevicePageTokens;
  /** Connection lease lifetime, whole seconds. */
  readonly leaseSeconds: number;
}
