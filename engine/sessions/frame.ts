/** Event-log line framing, `<16 hex xxhash64 of the JSON> <JSON>\n`: a torn or corrupted line is skipped, never trusted. */
import xxhash, { type XXHashAPI } from 'xxhash-wasm';

/** Characters before the JSON: 16 hex digits and a space. */
export const FRAME_PREFIX_BYTES = 17;

const HEX16 = /^[0-9a-f]{16}$/;
const SPACE = 0x20;

let hasher: Promise<XXHashAPI> | undefined;

/** The xxhash-wasm instance (compiled once per process). */
export function loadHasher(): Promise<XXHashAPI> {
  hasher ??= xxhash();
  return hasher;
}

/** The checksum of `json` as it is written: 16 lowercase hex digits. */
export function checksumOf(h: XXHashAPI, json: string): string {
  return h.h64ToString(json).padStart(16, '0');
}

/** One framed line for `json` (which must contain no newline; JSON.stringify output never does). */
export function frameLine(h: XXHashAPI, json: string): string {
  return `${checksumOf(h, json)} ${json}\n`;
}

/** {@link frameLine} as the bytes written, encoding the JSON once into the line's own buffer: a terminal record is every call's largest main-thread allocation. */
export function frameLineBytes(h: XXHashAPI, json: string): Buffer {
  const len = Buffer.byteLength(json, 'utf8');
  const line = Buffer.allocUnsafe(FRAME_PREFIX_BYTES + len + 1);
  line.write(json, FRAME_PREFIX_BYTES, len, 'utf8');
  const sum = h
    .h64Raw(line.subarray(FRAME_PREFIX_BYTES, FRAME_PREFIX_BYTES + len))
    .toString(16)
    .padStart(16, '0');
  line.write(sum, 0, 16, 'latin1');
  line[16] = SPACE;
  line[FRAME_PREFIX_BYTES + len] = 0x0a;
  return line;
}

/** The JSON of one line (without `\n`), or undefined when torn or corrupt; the checksum is checked on the raw bytes, before decoding. */
export function unframeLine(h: XXHashAPI, line: Uint8Array): string | undefined {
  if (line.length <= FRAME_PREFIX_BYTES || line[16] !== SPACE) return undefined;
  const sum = Buffer.from(line.buffer, line.byteOffset, 16).toString('latin1');
  if (!HEX16.test(sum)) return undefined;
  const body = line.subarray(FRAME_PREFIX_BYTES);
  const actual = h.h64Raw(body).toString(16).padStart(16, '0');
  if (actual !== sum) return undefined;
  return Buffer.from(body.buffer, body.byteOffset, body.length).toString('utf8');
}
