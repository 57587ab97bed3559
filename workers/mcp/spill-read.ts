/**
 * The call worker's side of a spilled MCP result (spill.ts): its text is
 * read from the host thread's spill file a chunk at a time, unescaped (JSON
 * string escapes, cut only between whole escapes and whole characters) and
 * written to the call's output with its backpressure, so the text is never
 * whole in memory. The worker opens its own descriptor of the file first
 * (`/proc/self/fd/N`, checked against the file's device and inode) and then
 * releases the host's.
 */
import { once } from 'node:events';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { ProtocolError } from '../../engine/protocol/errors.js';
import type { McpSpillRef } from '../../engine/protocol/mcp.js';

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

/** Opens this thread's own descriptor of the host's spill file; EPROTOCOL when that descriptor is not the file any more. */
export function openSpilled(ref: McpSpillRef): number {
  let fd: number;
  try {
    fd = openSync(`/proc/self/fd/${ref.fd}`, 'r');
  } catch (err) {
    throw new ProtocolError(`the spilled MCP result is gone: ${(err as Error).message}`);
  }
  const st = fstatSync(fd);
  if (st.dev !== ref.dev || st.ino !== ref.ino) {
    closeSync(fd);
    throw new ProtocolError('the spilled MCP result is gone: its descriptor names another file');
  }
  return fd;
}

/**
 * Writes the spilled text to `out` and closes `fd` (from {@link openSpilled}).
 * Resolves to its size in UTF-8 bytes and its first characters.
 */
export async function writeSpilled(
  ref: McpSpillRef,
  fd: number,
  out: Writable,
  signal: AbortSignal,
): Promise<{ bytes: number; head: string }> {
  let bytes = 0;
  let head = '';
  const put = async (text: string) => {
    if (text === '') return;
    bytes += Buffer.byteLength(text);
    if (head.length < HEAD_CHARS) head += text.slice(0, HEAD_CHARS - head.length);
    if (!out.write(text)) await once(out, 'drain', { signal });
  };
  const buf = Buffer.alloc(READ_CHUNK);
  try {
    for (const part of ref.parts) {
      if (typeof part === 'string') {
        await put(part);
        continue;
      }
      const decoder = new JsonStringDecoder();
      for (let at = part.start; at < part.end; ) {
        signal.throwIfAborted();
        const n = readSync(fd, buf, 0, Math.min(buf.length, part.end - at), at);
        if (n === 0) throw new ProtocolError('the spilled MCP result is shorter than its span');
        at += n;
        await put(decoder.write(buf.subarray(0, n)));
      }
      await put(decoder.end());
    }
  } finally {
    closeSync(fd);
  }
  return { bytes, head };
}
