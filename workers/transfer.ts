/**
 * Moving a tool's buffers instead of copying them: a writer copies what it
 * is given, since the tool may reuse its buffer once the write's callback
 * ran; {@link handOver} says the buffer is given away for good.
 */

/** Buffers given away (only a view covering its whole buffer can move). */
const handedOver = new WeakSet<ArrayBuffer>();

/**
 * Marks `bytes` as given away: once written, the tool must not touch it
 * (its memory moves and the view empties). Any view not covering its whole
 * buffer is copied as usual. Returns `bytes`.
 */
export function handOver<T extends Uint8Array>(bytes: T): T {
  // Only a plain ArrayBuffer can be transferred (not a SharedArrayBuffer, not WebAssembly memory).
  if (bytes.buffer instanceof ArrayBuffer && movable(bytes)) handedOver.add(bytes.buffer);
  return bytes;
}

/** True when `bytes` may move (handed over, covering its buffer); uses up the mark. @internal */
export function takeHandedOver(bytes: Uint8Array): boolean {
  const buffer = bytes.buffer;
  if (!(buffer instanceof ArrayBuffer) || !handedOver.delete(buffer)) return false;
  return movable(bytes);
}

/** A view that starts its buffer and covers all of it. */
function movable(bytes: Uint8Array): boolean {
  return bytes.byteOffset === 0 && bytes.byteLength > 0 && bytes.byteLength === bytes.buffer.byteLength;
}
