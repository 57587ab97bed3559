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
 * becomes empty). A view that starts its buffer and covers at least half
 * of it can move (the engine then holds at most twice the bytes, as long as
 * it holds the chunk); any other is copied as usual. Returns `bytes`.
 */
export function handOver<T extends Uint8Array>(bytes: T): T {
  const buffer = bytes.buffer;
  // Only a plain ArrayBuffer can be transferred (not a SharedArrayBuffer, not WebAssembly memory).
  if (buffer instanceof ArrayBuffer && movable(bytes)) {
    handedOver.add(buffer);
  }
  return bytes;
}

/**
 * True when `bytes` is a whole buffer the tool handed over; the mark is used
 * up (a handed-over buffer is written once). @internal
 */
export function takeHandedOver(bytes: Uint8Array): boolean {
  const buffer = bytes.buffer;
  if (!(buffer instanceof ArrayBuffer) || !handedOver.has(buffer)) return false;
  handedOver.delete(buffer);
  return movable(bytes);
}

/**
 * A view worth moving rather than copying: it starts its buffer and covers at
 * least half of it (workers/engine-port.ts transfers by the same rule). A
 * gathering buffer flushed half full moves instead of being copied.
 */
function movable(bytes: Uint8Array): boolean {
  return bytes.byteOffset === 0 && bytes.byteLength > 0 && bytes.byteLength * 2 >= bytes.buffer.byteLength;
}
