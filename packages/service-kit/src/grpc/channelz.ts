/**
 * grpc-js keeps channelz statistics by default (call counters, a timestamp per call and per
 * streamed message) for a channelz service that Unimatrix does not serve: servers and clients turn
 * them off. The benchmarks' bare floors do too, so that a floor differs from a service only in what
 * the service does.
 */
export const CHANNELZ_OFF = { "grpc.enable_channelz": 0 } as const;
