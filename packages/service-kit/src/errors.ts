import { status } from "@grpc/grpc-js";

/**
 * A caller-visible failure with a standard gRPC status code. Handlers and stores throw these;
 * the gRPC host turns them into statuses. Anything else that escapes a handler is INTERNAL.
 */
export class DomainError extends Error {
  constructor(
    /** The gRPC status code the caller receives. */
    readonly code: status,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Thrown when a request field is missing, malformed or out of range. The message names the field. */
export class InvalidArgumentError extends DomainError {
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super(status.INVALID_ARGUMENT, `${field}: ${reason}`);
  }
}

/** Thrown when a record does not exist or belongs to another tenant (no existence oracle). */
export class NotFoundError extends DomainError {
  constructor(message: string) {
    super(status.NOT_FOUND, message);
  }
}

/** Thrown when a create would collide with an existing record. */
export class AlreadyExistsError extends DomainError {
  constructor(message: string) {
    super(status.ALREADY_EXISTS, message);
  }
}

/** Thrown when the request is well-formed but the system is not in a state that allows it. */
export class FailedPreconditionError extends DomainError {
  constructor(message: string) {
    super(status.FAILED_PRECONDITION, message);
  }
}

/** Thrown when the principal is known and may see the record, but may not do this to it. */
export class PermissionDeniedError extends DomainError {
  constructor(message: string) {
    super(status.PERMISSION_DENIED, message);
  }
}

/** Thrown when a budget or limit (storage, open streams, rate) would be exceeded. */
export class ResourceExhaustedError extends DomainError {
  constructor(message: string) {
    super(status.RESOURCE_EXHAUSTED, message);
  }
}

/** Thrown when the call carries no credential, or one that is unknown, expired or revoked. */
export class UnauthenticatedError extends DomainError {
  constructor(message = "a valid credential is required") {
    super(status.UNAUTHENTICATED, message);
  }
}

/** Thrown when an RPC exists in the contract but is not served by this build. */
export class UnimplementedError extends DomainError {
  constructor(method: string) {
    super(status.UNIMPLEMENTED, `${method} is not implemented`);
  }
}

/** Thrown when the service is shutting down or a dependency is unreachable; the caller may retry. */
export class UnavailableError extends DomainError {
  constructor(message: string) {
    super(status.UNAVAILABLE, message);
  }
}

/**
 * A store read found something impossible (a row locked a moment ago is gone, a conflicting insert
 * cannot be read back). Not the caller's fault and not a bug in the request: the caller sees
 * ABORTED (retry), the log gets the detail.
 */
export class StoreAnomalyError extends Error {
  constructor(what: string) {
    super(`store anomaly: ${what}`);
    this.name = "StoreAnomalyError";
  }
}

/**
 * The abort reason of every open call's `ctx.signal` when the server shuts down: a stream that
 * sees it can say goodbye (e.g. a `closed { reason: SHUTDOWN }` event). Thrown on, callers get UNAVAILABLE.
 */
export class ShutdownReason extends UnavailableError {
  constructor() {
    super("server shutting down");
  }
}

/** True when `signal` was aborted because the server is shutting down. */
export function isShutdown(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason instanceof ShutdownReason;
}
