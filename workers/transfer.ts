/**
 * Moving a tool's buffers instead of copying them. A stream writer copies the
 * bytes of every Uint8Array it is given before posting them, because the
 * tool may reuse its buffer once the write's callback has run. A tool that
 * gives a buffer away for good (bytes read from a pipe and passed straight
 * on) can say so with {@link handOver}; the writer then transfers the
 * buffer's memory to the engine, which saves one copy of every byte.
 */

const handedOver = new WeakSet<ArrayBufferLike>();

/**
 * Marks `bytes` as given away: after writing it to a stream the tool must
 * not read or write it again (its memory moves to the engine and the view
 * becomes empty). Only a view that covers its whole buffer can move; any
 * other is copied as usual. Returns `bytes`.
 */
export function handOver<T extends Uint8Array>(bytes: T): T {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) handedOver.add(bytes.buffer);
  return bytes;
}

/** True when the buffer under `bytes` was handed over by the tool. @internal */
export function isHandedOver(bytes: Uint8Array): boolean {
  return handedOver.has(bytes.buffer);
}
