import { Metadata, type ServiceError, status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { DomainError } from "../errors";

/** The status a caller receives for an error thrown by a handler. */
export interface CallStatus {
  readonly code: status;
  readonly details: string;
  readonly metadata: Metadata;
}

/** True for an error that came back from another gRPC call (it carries its own status). */
export function isServiceError(error: unknown): error is ServiceError {
  return (
    error instanceof Error &&
    typeof (error as Partial<ServiceError>).code === "number" &&
    (error as Partial<ServiceError>).metadata instanceof Metadata
  );
}

/**
 * Maps a thrown error to a status: domain errors keep their code and message, statuses from
 * downstream calls pass through, anything else is INTERNAL with a generic message (and logged).
 */
export function toCallStatus(error: unknown, logger: Logger, method: string): CallStatus {
  if (error instanceof DomainError) return { code: error.code, details: error.message, metadata: new Metadata() };
  if (isServiceError(error)) {
    return { code: error.code, details: error.details, metadata: new Metadata() };
  }
  logger.error({ err: error, method }, "unhandled error in handler");
  return { code: status.INTERNAL, details: "internal error", metadata: new Metadata() };
}
