import type { SubscribeActivityResponse } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { Feed, type FeedListener, type FeedSource } from "@unimatrix/service-kit/bus";
import { encodeOnce } from "@unimatrix/service-kit/grpc";
import { eventOf } from "../convert";
import type { CubeDeps } from "../deps";
import { cubeChannel, positionOfActivity, subjectsOfAccess } from "../rules/channels";
import type { PrismaClient } from "../store/prisma";
import type { ActivityRow, ItemRow } from "../store/rows";
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

/** An item as every stream of the replica shares it: its stream event built and marked to be encoded once. */
function fedItem(item: ItemRow): FedItem {
  return { row: item.row, event: encodeOnce(eventOf(item)) };
}

/**
 * Hands an item this replica just committed (an append's or a reply's, whose state is known: no
 * reactions yet) to the cube's streams at once, without reading it back; when it is not the next
 * one the feed reads instead (kit `Feed.offer`).
 */
export function offerCommitted(feed: ActivityFeed, item: ItemRow): Promise<void> {
  const position = item.row.position;
  return feed.offer(item.row.cubeId, position - 1n, [fedItem(item)], position);
}

/** Where the activity feed reads: a cube's rows after a position, with their ack/claim state, as shared events. */
function activitySource(prisma: PrismaClient): FeedSource<bigint, FedItem> {
  return {
    channel: cubeChannel,
    head: (cubeId) => headOf(prisma, cubeId),
    async read(cubeId, after, limit) {
      const rows = await readAfter(prisma, cubeId, after, limit);
      const items = await loadItems(prisma, rows);
      return {
        items: items.map(fedItem),
        cursor: rows.at(-1)?.position ?? after,
      };
    },
    // An ACCESS doorbell is no news: the feed hands it to each stream's `notify` (re-check access).
    isNews: (message) => subjectsOfAccess(message) === undefined,
    // A doorbell naming a position this feed already passed (an append on this replica, offered).
    covered(message, cursor) {
      const through = positionOfActivity(message);
      return through !== undefined && through <= cursor;
    },
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
