import type { MessageInitShape } from "@bufbuild/protobuf";
import { type DescFile, type DescService, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type {
  ServerReflection,
  ServerReflectionResponse,
  ServerReflectionResponseSchema,
} from "@unimatrix/contracts/grpc/reflection/v1/reflection_pb";
import type { ServiceImpl } from "./call";

type Response = MessageInitShape<typeof ServerReflectionResponseSchema>;

/** Indexes the files behind the served services by file name and by every symbol they declare. */
function indexFiles(services: readonly DescService[]) {
  const byName = new Map<string, DescFile>();
  const bySymbol = new Map<string, DescFile>();
  const visit = (file: DescFile) => {
    if (byName.has(`${file.name}.proto`)) return;
    byName.set(`${file.name}.proto`, file);
    for (const message of file.messages)
      indexMessage(message.typeName, message.nestedMessages, message.nestedEnums, file);
    for (const e of file.enums) bySymbol.set(e.typeName, file);
    for (const service of file.services) {
      bySymbol.set(service.typeName, file);
      for (const method of service.methods) bySymbol.set(`${service.typeName}.${method.name}`, file);
    }
    for (const dependency of file.dependencies) visit(dependency);
  };
  const indexMessage = (typeName: string, nested: DescFile["messages"], enums: DescFile["enums"], file: DescFile) => {
    bySymbol.set(typeName, file);
    for (const m of nested) indexMessage(m.typeName, m.nestedMessages, m.nestedEnums, file);
    for (const e of enums) bySymbol.set(e.typeName, file);
  };
  for (const service of services) visit(service.file);
  return { byName, bySymbol };
}

/** The file and everything it imports, each once, the file first. */
function withDependencies(file: DescFile): Uint8Array[] {
  const seen = new Set<string>();
  const out: Uint8Array[] = [];
  const walk = (f: DescFile) => {
    if (seen.has(f.name)) return;
    seen.add(f.name);
    out.push(toBinary(FileDescriptorProtoSchema, f.proto));
    for (const d of f.dependencies) walk(d);
  };
  walk(file);
  return out;
}

/** `grpc.reflection.v1.ServerReflection` over the served services, so grpcurl and friends work. */
export function reflectionImpl(services: readonly DescService[]): ServiceImpl<typeof ServerReflection> {
  const { byName, bySymbol } = indexFiles(services);
  const notFound = (message: string): Response["messageResponse"] => ({
    case: "errorResponse",
    value: { errorCode: 5, errorMessage: message },
  });
  const answer = (request: ServerReflectionResponse["originalRequest"] & object): Response["messageResponse"] => {
    const { messageRequest } = request;
    switch (messageRequest.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: services.map((s) => ({ name: s.typeName })) } };
      case "fileByFilename": {
        const file = byName.get(messageRequest.value);
        return file
          ? { case: "fileDescriptorResponse", value: { fileDescriptorProto: withDependencies(file) } }
          : notFound(`file ${messageRequest.value} not found`);
      }
      case "fileContainingSymbol": {
        const file = bySymbol.get(messageRequest.value.replace(/^\./, ""));
        return file
          ? { case: "fileDescriptorResponse", value: { fileDescriptorProto: withDependencies(file) } }
          : notFound(`symbol ${messageRequest.value} not found`);
      }
      case "allExtensionNumbersOfType":
        return {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: messageRequest.value, extensionNumber: [] },
        };
      default:
        return { case: "errorResponse", value: { errorCode: 12, errorMessage: "request kind not supported" } };
    }
  };
  return {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        yield { validHost: request.host, originalRequest: request, messageResponse: answer(request) };
      }
    },
  };
}
