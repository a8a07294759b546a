import type { Clock } from "@unimatrix/service-kit";
import type { NotePublisher } from "../events";
import type { Db } from "../store/db";

/** What every handler of the device service is built from. */
export interface HandlerDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly publisher: NotePublisher;
  /** Connection lease lifetime, whole seconds. */
  readonly leaseSeconds: number;
}
