/**
 * Reading a child's pipe straight into buffers of our choosing. A
 * `net.Socket` made by `child_process` or by handle passing reads into a
 * fresh 64 KiB buffer per read and pushes it through its Readable: per GiB
 * ~50,000 allocations, as many stream pushes and the collections they start,
 * more than half of the worker's CPU in a capture. A socket made with
 * `onread` reads into the buffer its `buffer` function returns, with no
 * allocation and no stream, but only `new net.Socket({ onread })` makes one:
 * so the pipe's handle moves to a new socket made that way. Where the
 * socket is not one over a libuv stream handle (or Node lays it out
 * otherwise), nothing moves and the caller reads the stream as it is
 * (docs/benchmarks.md, "Capture").
 */
import { Socket } from 'node:net';
import type { Readable } from 'node:stream';

/** The stream handle under a socket: what the takeover needs of it. */
interface StreamHandle {
  useUserBuffer?: unknown;
  readStop?: unknown;
}

/** What reads go to: `buffer()` is where the next read lands (never empty); `landed(n)` says n bytes landed there, false to stop reading. */
export interface DirectReads {
  buffer(): Uint8Array;
  landed(n: number): boolean;
}

/** A pipe read through {@link DirectReads}: pause and resume it, listen for 'end', 'error' and 'close'. */
export interface DirectPipe {
  readonly socket: Socket;
  /** Bytes the old socket had read already, in order before any read of the new one. */
  readonly buffered: Buffer | undefined;
}

/**
 * Moves `src`'s handle to a socket reading through `reads`; undefined when
 * it cannot (then `src` is untouched). `src` is closed without closing the
 * handle: its 'close' goes to whoever listened (a ChildProcess counts its
 * pipes' closes), and nothing may read it any more.
 */
export function takeOverPipe(src: Readable, reads: DirectReads): DirectPipe | undefined {
  if (!(src instanceof Socket) || src.destroyed) return undefined;
  const s = src as Socket & { _handle?: StreamHandle | null; _readableState?: { ended?: boolean } };
  const handle = s._handle;
  // The old socket saw end of file already: it closes the handle itself.
  if (s._readableState?.ended !== false) return undefined;
  if (!handle || typeof handle.useUserBuffer !== 'function' || typeof handle.readStop !== 'function') return undefined;
  // What the old socket read before now (it starts reading when it is made) comes first.
  // (A read takes what is buffered and cannot end the stream: end of file comes from the loop.)
  const buffered = s.readableLength > 0 ? (s.read() as Buffer | null) : null;
  // The old socket lets go: closing it now would close the descriptor.
  s._handle = null;
  const socket = new Socket({
    handle,
    readable: true,
    writable: false,
    onread: { buffer: () => reads.buffer(), callback: (n: number) => reads.landed(n) },
  } as ConstructorParameters<typeof Socket>[0]);
  s.destroy();
  return { socket, buffered: buffered ?? undefined };
}
