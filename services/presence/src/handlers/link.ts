import type { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { type LinkDeps, linkStream } from "../live/link-stream";
import { requireMachine } from "../rules/access";

export type { LinkDeps } from "../live/link-stream";

/** LinkService: a machine's own link (checks here, the stream body in live/link-stream.ts). */
export function linkHandlers(deps: LinkDeps): ServiceImpl<typeof LinkService> {
  return {
    async *link(requests, ctx) {
      const principal = requireMachine(await ctx.principal());
      yield* linkStream(deps, principal, requests, ctx);
    },
  };
}
