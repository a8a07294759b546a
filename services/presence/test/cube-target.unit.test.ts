import { ConfigError } from "@unimatrix/service-kit/config";
import { readPresenceConfig } from "../src/config";

describe("PRESENCE_CUBE_ADDRESS", () => {
  it.each([
    "cube:7001",
    "127.0.0.1:7001",
    "[::1]:7001",
    "dns:///cube-headless:7001",
    "ipv4:10.0.0.1:7001,10.0.0.2:7001",
  ])("accepts the gRPC target %s", (target) => {
    expect(readPresenceConfig({ PRESENCE_CUBE_ADDRESS: target }).cubeAddress).toBe(target);
  });

  it.each(["cube", "dns:///", "ipv4:", "two words:7001"])("refuses %j naming the variable", (target) => {
    expect(() => readPresenceConfig({ PRESENCE_CUBE_ADDRESS: target })).toThrow(ConfigError);
    expect(() => readPresenceConfig({ PRESENCE_CUBE_ADDRESS: target })).toThrow(
      /PRESENCE_CUBE_ADDRESS must be a gRPC target/,
    );
  });

  it("stays optional", () => {
    expect(readPresenceConfig({}).cubeAddress).toBeUndefined();
  });
});
