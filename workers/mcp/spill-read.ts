/**
 * The call worker's side of a spilled MCP result (spill.ts): its text is
 * read from the host thread's spill file a chunk at a time, unescaped (JSON
 * string escapes, cut only between whole escapes and whole characters) and
 * written to the call's output with its backpressure, so the text is never
 * whole in memory. It reads through a descriptor of its own, opened as
 * `/proc/self/fd/<the host's fd>` (the file is unlinked: no path names it)
 * and checked to be the file the host reported (device, inode and the
 * random name it was created under) before a byte is read: the
 * host's number may have been closed (the host died, the engine closed) and
 * reused by the process for any other file. Its own descriptor also keeps
 * the file readable whenever the host lets go of it; it is closed when the
 * copy ends, and with the thread when the thread is terminated (Node closes
 * a worker's descriptors).
 */
import { once } from 'node:events';
import { type FileHandle, open, readlink } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { ProtocolError, WorkerCrashError } from '../../engine/protocol/errors.js';
import type { McpSpillRef, McpSpillSpan } from '../../engine/protocol/mcp.js';
import type { Attachment } from '../../engine/protocol/messages.js';

const READ_CHUNK = 256 * 1024;
/** Characters of the text kept for the status note of a failed call. */
const HEAD_CHARS = 400;

/** Where JSON-escaped text `s` may be cut so that both sides are whole escapes: the index, `s.length` for anywhere. */
export function safeCut(s: string): number {
  let i = s.indexOf('\\');
  while (i !== -1) {
    if (i + 1 >= s.length) return i;
    if (s[i + 1] !== 'u') {
      i = s.indexOf('\\', i + 2);
      continue;
    }
    if (i + 6 > s.length) return i;
    const code = Number.parseInt(s.slice(i + 2, i + 6), 16);
    // A high surrogate stays with the escape after it, which may be its low half.
    if (code >= 0xd800 && code <= 0xdbff && i + 12 > s.length) return i;
    i = s.indexOf('\\', i + 6);
  }
  return s.length;
}

/** Unescapes a JSON string's bytes given a chunk at a time. */
export class JsonStringDecoder {
  private readonly utf8 = new StringDecoder('utf8');
  private carry = '';

  /** The text of the next chunk of escaped bytes (what can be decoded of it so far). */
  write(bytes: Buffer): string {
    const s = this.carry + this.utf8.write(bytes);
    const cut = safeCut(s);
    this.carry = s.slice(cut);
    return cut === 0 ? '' : (JSON.parse(`"${s.slice(0, cut)}"`) as string);
  }

  /** The rest. Throws a SyntaxError when the bytes did not end a string. */
  end(): string {
    const s = this.carry + this.utf8.end();
    this.carry = '';
    return s === '' ? '' : (JSON.parse(`"${s}"`) as string);
  }
}

/**
 * A descriptor of this thread's own on the spill file of `ref`, or
 * EWORKERCRASH when the host's descriptor is closed or now names another
 * file (then nothing is read).
 */
export async function openSpill(ref: Pick<McpSpillRef, 'token' | 'fd' | 'dev' | 'ino' | 'path'>): Promise<FileHandle> {
  const gone = (why: string) =>
    new WorkerCrashError(`the MCP host's spill file of this result is gone (${why})`, {
      token: ref.token,
      fd: ref.fd,
    });
  let fh: FileHandle;
  try {
    fh = await open(`/proc/self/fd/${ref.fd}`, 'r');
  } catch (err) {
    throw gone(`its descriptor ${ref.fd} cannot be opened: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  try {
    const st = await fh.stat({ bigint: true });
    // This thread's own descriptor cannot change under it: its link names the file it opened.
    const link = await readlink(`/proc/self/fd/${fh.fd}`);
    if (String(st.dev) !== ref.dev || String(st.ino) !== ref.ino || link !== `${ref.path} (deleted)`) {
      throw gone(`descriptor ${ref.fd} now names another file`);
    }
    return fh;
  } catch (err) {
    await fh.close();
    throw err;
  }
}

/** Decodes a span a chunk at a time: JSON string escapes undone, or (raw) UTF-8 as it is. */
async function eachText(
  fh: FileHandle,
  span: McpSpillSpan,
  buf: Buffer,
  signal: AbortSignal,
  put: (text: string) => Promise<void> | void,
): Promise<void> {
  const decoder = span.raw ? new StringDecoder('utf8') : new JsonStringDecoder();
  for (let at = span.start; at < span.end; ) {
    signal.throwIfAborted();
    const { bytesRead: n } = await fh.read(buf, 0, Math.min(buf.length, span.end - at), at);
    if (n === 0) throw new ProtocolError('the spilled MCP result is shorter than its span');
    at += n;
    await put(decoder.write(buf.subarray(0, n)));
  }
  await put(decoder.end());
}

/**
 * Writes the spilled text to `out`, reading through a descriptor of its own
 * on the host's spill file ({@link openSpill}), and reads the
 * spilled attachments (within the attachment bounds) into memory. Resolves
 * to the text's size in UTF-8 bytes, its first characters and the attachments.
 */
export async function writeSpilled(
  ref: McpSpillRef,
  out: Writable,
  signal: AbortSignal,
): Promise<{ bytes: number; head: string; attachments: Attachment[] }> {
  let bytes = 0;
  let head = '';
  const put = async (text: string) => {
    if (text === '') return;
    bytes += Buffer.byteLength(text);
    if (head.length < HEAD_CHARS) head += text.slice(0, HEAD_CHARS - head.length);
    if (!out.write(text)) await once(out, 'drain', { signal });
  };
  const fh = await openSpill(ref);
  try {
    const buf = Buffer.alloc(READ_CHUNK);
    for (const part of ref.parts) {
      if (typeof part === 'string') await put(part);
      else await eachText(fh, part, buf, signal, put);
    }
    const attachments: Attachment[] = [];
    for (const a of ref.attachments) {
      const pieces: string[] = [];
      await eachText(fh, a.span, buf, signal, (t) => {
        pieces.push(t);
      });
      attachments.push({
        mediaType: a.mediaType,
        data: pieces.join(''),
        ...(a.name !== undefined ? { name: a.name } : {}),
      });
    }
    return { bytes, head, attachments };
  } finally {
    await fh.close();
  }
}
