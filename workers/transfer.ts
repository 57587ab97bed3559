/**
 * Moving a tool's buffers instead of copying them. A stream writer copies the
 * bytes of every Uint8Array it is given before posting them, because the
 * tool may reuse its buffer once the write's callback has run. A tool that
 * gives a buffer away for good (bytes read from a pipe and passed straight
 * on) can say so with {@link handOver}; the writer then transfers the
 * buffer's memory to the engine, which saves one copy of every byte.
 */

/** Buffers marked as given away (only a view that covers its whole buffer can move: moving empties every view into it). */
const handedOver = new WeakSet<ArrayBuffer>();

/**
 * Marks `bytes` as given away: after writing it to a stream the tool must
 * not read or write it again (its memory moves to the engine and the view
 * becomes empty). Only a view that covers its whole buffer can move; any
 * other is copied as usual. Returns `bytes`.
 */
export function handOver<T extends Uint8Array>(bytes: T): T {
  // Only a plain ArrayBuffer can be transferred (not a SharedArrayBuffer, not WebAssembly memory).
  if (bytes.buffer instanceof ArrayBuffer && movable(bytes)) handedOver.add(bytes.buffer);
  return bytes;
}

/**
 * True when `bytes` may move: its buffer was handed over and the view still
 * covers all of it; the mark is used up (a handed-over buffer is written
 * once). @internal
 */
export function takeHandedOver(bytes: Uint8Array): boolean {
  const buffer = bytes.buffer;
  if (!(buffer instanceof ArrayBuffer) || !handedOver.delete(buffer)) return false;
  return movable(bytes);
}

/** A view that starts its buffer and covers all of it. */
function movable(bytes: Uint8Array): boolean {
  return bytes.byteOffset === 0 && bytes.byteLength > 0 && bytes.byteLength === bytes.buffer.byteLength;
}
