import { NotFoundError } from "@unimatrix/service-kit/errors";
import { WRITE } from "./access";

/** Who is reading: a drone (with what decides its visibility) or another principal. */
export type Viewer =
  | { readonly kind: "drone"; readonly droneId: string; readonly participant: boolean; readonly allDirect: boolean }
  | { readonly kind: "principal" };

/** What of a principal's standing in a cube decides what it sees. */
export interface ViewerFacts {
  readonly access: number;
  /** Set for drone sessions. */
  readonly drone?: { readonly id: string; readonly receivesAllDirect: boolean };
}

/** The viewer a standing describes: a drone session reads as its drone, a participant when its grant is ≥ WRITE. */
export function viewerOf(s: ViewerFacts): Viewer {
  if (!s.drone) return { kind: "principal" };
  return { kind: "drone", droneId: s.drone.id, participant: s.access >= WRITE, allDirect: s.drone.receivesAllDirect };
}

/** The fields of an activity item visibility looks at. */
export interface VisibilityFacts {
  readonly itemType: string;
  readonly visibility: string | null;
  readonly authorDroneId: string | null;
  readonly recipientDroneIds: readonly string[];
}

/**
 * Whether a viewer may see an item: observers see broadcast entries only; participants also their
 * own, addressed and (receives-all-direct) direct entries and their notifications; other principals
 * every entry and no notification.
 */
export function visibleTo(viewer: Viewer, item: VisibilityFacts): boolean {
  if (item.itemType === "notification") return viewer.kind === "drone" && item.recipientDroneIds[0] === viewer.droneId;
  if (item.visibility === "broadcast" || viewer.kind === "principal") return true;
  if (!viewer.participant) return false;
  return viewer.allDirect || item.authorDroneId === viewer.droneId || item.recipientDroneIds.includes(viewer.droneId);
}

/** An item the viewer may see, else NOT_FOUND naming `what` (an unseen item reads as a missing one: no oracle). */
export function requireVisible<T extends VisibilityFacts>(viewer: Viewer, item: T | null, what = "entry not found"): T {
  if (!item || !visibleTo(viewer, item)) throw new NotFoundError(what);
  return item;
}
