import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

/**
 * Seals text for the fleet (AES-256-GCM, a key derived from the internal key and a purpose): what
 * one gateway seals every gateway opens, and nothing else can read or forge it. MCP sessions seal
 * the drone token they keep; 2026-07-28 task ids are sealed task descriptions.
 */
export class Sealer {
  readonly #key: Buffer;

  constructor(internalKey: string, purpose: string) {
    this.#key = createHash("sha256").update(`${purpose}\0${internalKey}`).digest();
  }

  seal(text: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const body = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url");
  }

  /** The sealed text; throws when `sealed` was not sealed by this fleet for this purpose (or was altered). */
  unseal(sealed: string): string {
    const raw = Buffer.from(sealed, "base64url");
    if (raw.length < 28) throw new RangeError("not a sealed value");
    const decipher = createDecipheriv("aes-256-gcm", this.#key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
  }
}
