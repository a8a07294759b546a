import { create, type DescMessage, type DescService, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";
import { binaryFault } from "./decode-faults";
import { UndecodableRequest } from "./request-rules";

/** The gRPC path of a method: `/<package.Service>/<Method>`. */
const methodPath = (service: DescService, name: string) => `/${service.typeName}/${name}`;

const shared = new WeakMap<object, Buffer | null>();

/**
 * Marks a message that will be written unchanged to many streams (a fan-out): it is encoded
 * once and the bytes are reused. The message must not be modified afterwards.
 */
export function encodeOnce<T extends object>(message: T): T {
  if (!shared.has(message)) shared.set(message, null);
  return message;
}

function serializer(schema: DescMessage) {
  return (value: unknown) => {
    // `create` returns an existing message of the schema as is, and builds one from an init shape.
    const message = create(schema, value as never);
    const cached = shared.get(message);
    if (cached) return cached;
    const bytes = Buffer.from(toBinary(schema, message));
    if (cached === null) shared.set(message, bytes);
    return bytes;
  };
}

function deserializer(schema: DescMessage) {
  return (bytes: Buffer) => fromBinary(schema, bytes);
}

/**
 * A server's request decoder: grpc-js answers INTERNAL for a throwing deserializer, so an
 * undecodable request becomes a marker that the request rules turn into INVALID_ARGUMENT.
 */
function requestDeserializer(schema: DescMessage) {
  return (bytes: Buffer) => {
    try {
      return fromBinary(schema, bytes);
    } catch (error) {
      const fault = binaryFault(schema, bytes);
      const cause = fault?.reason ?? (error instanceof Error ? error.message : String(error));
      return new UndecodableRequest(schema.typeName, cause, fault?.field);
    }
  };
}

/**
 * A `@grpc/grpc-js` service definition built from a protobuf-es service descriptor: no generated
 * stubs, the same descriptor on both sides. Keys are the methods' local (camelCase) names.
 */
export function serviceDefinition(service: DescService): ServiceDefinition {
  const definition: Record<string, MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: methodPath(service, method.name),
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: serializer(method.input),
      requestDeserialize: requestDeserializer(method.input),
      responseSerialize: serializer(method.output),
      responseDeserialize: deserializer(method.output),
      originalName: method.name,
    };
  }
  return definition as ServiceDefinition;
}
