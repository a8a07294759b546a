import type { SubscribeActivityResponse } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { Feed, type FeedListener, type FeedSource } from "@unimatrix/service-kit/bus";
import { encodeOnce } from "@unimatrix/service-kit/grpc";
import { eventOf } from "../convert";
import type { CubeDeps } from "../deps";
import { cubeChannel, subjectsOfAccess } from "../rules/channels";
import type { PrismaClient } from "../store/prisma";
import type { ActivityRow } from "../store/rows";
import { headOf, loadItems, readAfter } from "../tables/entries";

/**
 * One committed item as the feed hands it to streams: the row (for visibility and contiguity) and
 * its stream event, built once and shared by every stream of the replica (encoded once, too).
 */
export interface FedItem {
  readonly row: ActivityRow;
  readonly event: SubscribeActivityResponse;
}

/** The replica's activity feeds: one kit Feed keyed by cube id, positions as cursors. */
export type ActivityFeed = Feed<bigint, FedItem>;

/** A stream attached to the activity feed. */
export type ActivityListener = FeedListener<FedItem>;

/** Where the activity feed reads: a cube's rows after a position, with their ack/claim state, as shared events. */
function activitySource(prisma: PrismaClient): FeedSource<bigint, FedItem> {
  return {
    channel: cubeChannel,
    head: (cubeId) => headOf(prisma, cubeId),
    async read(cubeId, after, limit) {
      const rows = await readAfter(prisma, cubeId, after, limit);
      const items = await loadItems(prisma, rows);
      return {
        items: items.map((item) => ({ row: item.row, event: encodeOnce(eventOf(item)) })),
        cursor: rows.at(-1)?.position ?? after,
      };
    },
    // An ACCESS doorbell is no news: the feed hands it to each stream's `notify` (re-check access).
    isNews: (message) => subjectsOfAccess(message) === undefined,
  };
}

/** The activity feed of one replica; a stream more than `CUBE_STREAM_MAX_BACKLOG` items behind is cut. */
export function activityFeed(deps: Pick<CubeDeps, "prisma" | "bus" | "logger" | "config">): ActivityFeed {
  return new Feed({
    source: activitySource(deps.prisma),
    bus: deps.bus,
    logger: deps.logger,
    budget: { maxItems: deps.config.streamMaxBacklog },
  });
}
