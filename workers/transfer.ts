/**
 * Moving a tool's buffers instead of copying them. A stream writer copies the
 * bytes of every Uint8Array it is given before posting them, because the
 * tool may reuse its buffer once the write's callback has run. A tool that
 * gives a buffer away for good (bytes read from a pipe and passed straight
 * on) can say so with {@link handOver}; the writer then transfers the
 * buffer's memory to the engine, which saves one copy of every byte.
 */

/**
 * Buffers marked as given away, each with the shortest view of it that may
 * move: the whole buffer for a tool's {@link handOver} (moving a buffer
 * empties every view into it, and a tool may still hold another view of
 * the rest), half of it for the worker's own gathering buffers, which
 * nothing else references ({@link handOverOwned}).
 */
const handedOver = new WeakMap<ArrayBufferLike, 'whole' | 'half'>();

/**
 * Marks `bytes` as given away: after writing it to a stream the tool must
 * not read or write it again (its memory moves to the engine and the view
 * becomes empty). Only a view that covers its whole buffer can move; any
 * other is copied as usual. Returns `bytes`.
 */
export function handOver<T extends Uint8Array>(bytes: T): T {
  return mark(bytes, 'whole');
}

/**
 * {@link handOver} for a buffer no other view references (the pipe
 * gatherer's): a view that starts it and covers at least half of it moves
 * too, its unused end with it (the engine then holds at most twice the
 * bytes, as long as it holds the chunk). @internal
 */
export function handOverOwned<T extends Uint8Array>(bytes: T): T {
  return mark(bytes, 'half');
}

function mark<T extends Uint8Array>(bytes: T, rule: 'whole' | 'half'): T {
  // Only a plain ArrayBuffer can be transferred (not a SharedArrayBuffer, not WebAssembly memory).
  if (bytes.buffer instanceof ArrayBuffer && movable(bytes, rule)) handedOver.set(bytes.buffer, rule);
  return bytes;
}

/**
 * True when `bytes` may move: its buffer was handed over and the view is
 * long enough by the rule it was handed over with; the mark is used up (a
 * handed-over buffer is written once). @internal
 */
export function takeHandedOver(bytes: Uint8Array): boolean {
  const buffer = bytes.buffer;
  const rule = buffer instanceof ArrayBuffer ? handedOver.get(buffer) : undefined;
  if (rule === undefined) return false;
  handedOver.delete(buffer);
  return movable(bytes, rule);
}

/** A view that starts its buffer and covers all of it, or with `half` at least half of it. */
function movable(bytes: Uint8Array, rule: 'whole' | 'half'): boolean {
  if (bytes.byteOffset !== 0 || bytes.byteLength === 0) return false;
  return rule === 'whole'
    ? bytes.byteLength === bytes.buffer.byteLength
    : bytes.byteLength * 2 >= bytes.buffer.byteLength;
}
