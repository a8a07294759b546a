import { create, type DescMessage, type DescService, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";

/** The gRPC path of a method: `/<package.Service>/<Method>`. */
export const methodPath = (service: DescService, name: string) => `/${service.typeName}/${name}`;

function serializer(schema: DescMessage) {
  // `create` returns an existing message of the schema as is, and builds one from an init shape.
  return (value: unknown) => Buffer.from(toBinary(schema, create(schema, value as never)));
}

function deserializer(schema: DescMessage) {
  return (bytes: Buffer) => fromBinary(schema, bytes);
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
      requestDeserialize: deserializer(method.input),
      responseSerialize: serializer(method.output),
      responseDeserialize: deserializer(method.output),
      originalName: method.name,
    };
  }
  return definition as ServiceDefinition;
}
