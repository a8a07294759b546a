import type { Clock } from "@unimatrix/service-kit/clock";
import { sweepExpiredLeases } from "../store/leases";
import type { Db } from "../store/rows";
import type { NotePublisher } from "./notes";

/** The expired-lease sweep: one run at a time per replica; each run's offline notes are published. */
export interface LeaseSweeper {
  /** Runs one sweep now (joins the one under way); resolves to how many devices went offline. */
  run(): Promise<number>;
  /** Resolves when no sweep is under way (for a clean stop). */
  idle(): Promise<void>;
}

/** A sweeper over the device store, at the service clock's time. */
export function leaseSweeper(db: Db, clock: Clock, publisher: NotePublisher): LeaseSweeper {
  let sweeping: Promise<number> | undefined;
  return {
    run() {
      sweeping ??= (async () => {
        try {
          const notes = await sweepExpiredLeases(db, clock.now());
          await publisher.publish(notes);
          return notes.length;
        } finally {
          sweeping = undefined;
        }
      })();
      return sweeping;
    },
    async idle() {
      await sweeping?.catch(() => 0);
    },
  };
}
