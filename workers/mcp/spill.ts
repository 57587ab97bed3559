/**
 * MCP messages too large to hold, on the host thread. A JSON-RPC message is
 * one line; past {@link SPILL_BYTES} the transport writes the rest of the
 * line to an unlinked temporary file instead of memory. The line is then
 * parsed from the file into a skeleton: the message as the SDK expects it,
 * except that each large tool-result text (`result.content[i].text`, or an
 * embedded resource's `text`) is a short sentinel string standing for a span
 * of the file (its JSON-escaped bytes). The call worker reads and unescapes
 * that span straight into the call's output (spill-read.ts), so a 50 MB
 * result is never a string in any thread.
 *
 * The file descriptor belongs to the host thread: the worker opens its own
 * descriptor of the same file through `/proc/self/fd/N` as soon as it has
 * the outcome and releases the host's (`release`), which otherwise closes it
 * after {@link SPILL_HOLD_MS}. Nothing is left on disk in any case: the file
 * is unlinked as soon as it is created.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { McpSpillRef } from '../../engine/protocol/mcp.js';

/** Bytes of a line held in memory before the rest goes to a file. */
export const SPILL_BYTES = 1024 * 1024;
/** Strings at a spillable place longer than this (escaped bytes) stay in the file. */
export const SPAN_MIN_BYTES = 64 * 1024;
/** How long the host keeps a spill file's descriptor for a worker that has not released it. */
export const SPILL_HOLD_MS = 60_000;

const READ_CHUNK = 256 * 1024;

/** A span of JSON-escaped string bytes in a spill file. */
export interface SpillSpan {
  start: number;
  end: number;
}

interface Spill {
  fd: number;
  dev: number;
  ino: number;
  spans: Map<string, SpillSpan>;
  timer: NodeJS.Timeout;
}

/** Open spill files by token (their sentinels carry the token). */
const spills = new Map<string, Spill>();

const SENTINEL = /^\u0000sluice-spill:([0-9a-f]{24}):(\d+)\u0000$/;

function closeSpill(token: string): void {
  const s = spills.get(token);
  if (!s) return;
  spills.delete(token);
  clearTimeout(s.timer);
  closeSync(s.fd);
}

/** The worker has its own descriptor (or never will): the host's is closed. */
export function releaseSpill(token: string): void {
  closeSpill(token);
}

/** Open spill files now (for tests). */
export function openSpills(): number {
  return spills.size;
}

/**
 * The spill file and span a sentinel stands for, or undefined for any other
 * string. Claiming keeps the file open for the worker until it releases it.
 */
export function claimSpan(text: string): { ref: Omit<McpSpillRef, 'parts'>; span: SpillSpan } | undefined {
  const m = SENTINEL.exec(text);
  const s = m ? spills.get(m[1] as string) : undefined;
  const span = s?.spans.get(text);
  if (!m || !s || !span) return undefined;
  return { ref: { token: m[1] as string, fd: s.fd, dev: s.dev, ino: s.ino }, span };
}

/** Writes the tail of one oversized line to an unlinked file, then parses it into a skeleton. */
export class SpillWriter {
  private readonly fd: number;
  private size = 0;

  constructor() {
    const path = join(tmpdir(), `sluice-mcp-spill-${process.pid}-${randomBytes(8).toString('hex')}`);
    this.fd = openSync(path, 'wx+', 0o600);
    unlinkSync(path);
  }

  /** Appends bytes of the line. */
  write(piece: Buffer): void {
    let off = 0;
    while (off < piece.length) off += writeSync(this.fd, piece, off, piece.length - off, this.size + off);
    this.size += piece.length;
  }

  /** The line is whole: the message, with large result texts as sentinels of spans of the file. */
  end(): unknown {
    const token = randomBytes(12).toString('hex');
    const spans = new Map<string, SpillSpan>();
    let value: unknown;
    try {
      value = parseSkeleton(this.fd, this.size, (span) => {
        const sentinel = `\u0000sluice-spill:${token}:${spans.size}\u0000`;
        spans.set(sentinel, span);
        return sentinel;
      });
    } catch (err) {
      closeSync(this.fd);
      throw err;
    }
    if (spans.size === 0) {
      closeSync(this.fd);
      return value;
    }
    const st = fstatSync(this.fd);
    const timer = setTimeout(() => closeSpill(token), SPILL_HOLD_MS);
    timer.unref();
    spills.set(token, { fd: this.fd, dev: st.dev, ino: st.ino, spans, timer });
    return value;
  }

  /** The line was refused: the file goes. */
  discard(): void {
    closeSync(this.fd);
  }
}

/** Whether the value about to be read sits where a tool result's text does. */
function spillable(path: readonly (string | number)[]): boolean {
  // result.content[i].text, result.content[i].resource.text
  if (path[0] !== 'result' || path[1] !== 'content' || typeof path[2] !== 'number') return false;
  return (
    (path.length === 4 && path[3] === 'text') || (path.length === 5 && path[3] === 'resource' && path[4] === 'text')
  );
}

type Frame =
  | { kind: 'object'; value: Record<string, unknown>; key: string | undefined }
  | { kind: 'array'; value: unknown[] };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Parses the JSON text of `size` bytes in `fd`, reading it a chunk at a
 * time; a string at a {@link spillable} place of more than
 * {@link SPAN_MIN_BYTES} is not read into memory but replaced by
 * `span({ start, end })` (its escaped bytes, quotes excluded). Throws a
 * SyntaxError for text that is not JSON. `chunkBytes` is the read size.
 */
export function parseSkeleton(
  fd: number,
  size: number,
  span: (s: SpillSpan) => string,
  chunkBytes = READ_CHUNK,
): unknown {
  const buf = Buffer.alloc(Math.min(chunkBytes, Math.max(size, 1)));
  let base = 0;
  let len = 0;
  let i = 0;
  let chunk = buf.subarray(0, 0);
  const fill = (): boolean => {
    base += len;
    i = 0;
    len = base >= size ? 0 : readSync(fd, buf, 0, Math.min(buf.length, size - base), base);
    chunk = buf.subarray(0, len);
    return len > 0;
  };
  const find = (byte: number, from: number): number => {
    const at = chunk.indexOf(byte, from);
    return at === -1 ? len : at;
  };
  const peek = (): number => {
    if (i >= len && !fill()) return -1;
    return buf[i] as number;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`bad JSON in a spilled MCP message at byte ${base + i}: ${what}`);
  };
  const skipSpace = (): number => {
    for (;;) {
      const c = peek();
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else return c;
    }
  };
  /**
   * Reads a string after its opening quote: where its escaped bytes start and
   * end, and those bytes while they are at most `limit` (null past it).
   */
  const readString = (limit: number): { raw: Buffer[] | null; start: number; end: number } => {
    const start = base + i;
    let raw: Buffer[] | null = [];
    let kept = 0;
    let escaped = false;
    for (;;) {
      if (i >= len && !fill()) fail('unterminated string');
      let j = i;
      if (escaped) {
        j++;
        escaped = false;
      }
      let end = -1;
      let q = -1;
      let b = -1;
      while (j < len) {
        // Each search runs once per occurrence it finds: linear in the chunk however many escapes it has.
        if (q < j) q = find(QUOTE, j);
        if (b < j) b = find(BACKSLASH, j);
        if (b < q) {
          j = b + 2;
          if (j > len) escaped = true;
          continue;
        }
        if (q < len) end = q;
        break;
      }
      const stop = end === -1 ? len : end;
      if (raw && stop > i) {
        if (kept + stop - i > limit) raw = null;
        else {
          raw.push(Buffer.from(chunk.subarray(i, stop)));
          kept += stop - i;
        }
      }
      if (end !== -1) {
        i = end + 1;
        return { raw, start, end: base + end };
      }
      i = len;
    }
  };
  const decode = (raw: Buffer[] | null): string => {
    if (!raw) return fail('string too long');
    return JSON.parse(`"${Buffer.concat(raw).toString('utf8')}"`) as string;
  };

  const path: (string | number)[] = [];
  const stack: Frame[] = [];
  let root: unknown;
  let done = false;
  const put = (v: unknown) => {
    const top = stack[stack.length - 1];
    if (!top) {
      root = v;
      done = true;
    } else if (top.kind === 'array') top.value.push(v);
    else top.value[top.key as string] = v;
  };
  const readValue = (): void => {
    const c = skipSpace();
    if (c === QUOTE) {
      i++;
      const s = readString(spillable(path) ? SPAN_MIN_BYTES : Number.POSITIVE_INFINITY);
      put(s.raw ? decode(s.raw) : span({ start: s.start, end: s.end }));
    } else if (c === 0x7b) {
      i++;
      const value: Record<string, unknown> = {};
      put(value);
      stack.push({ kind: 'object', value, key: undefined });
      done = false;
    } else if (c === 0x5b) {
      i++;
      const value: unknown[] = [];
      put(value);
      stack.push({ kind: 'array', value });
      done = false;
    } else {
      let text = '';
      for (;;) {
        const d = peek();
        if (
          d === -1 ||
          d === 0x2c ||
          d === 0x7d ||
          d === 0x5d ||
          d === 0x20 ||
          d === 0x0a ||
          d === 0x0d ||
          d === 0x09
        ) {
          break;
        }
        text += String.fromCharCode(d);
        i++;
        if (text.length > 400) fail('literal too long');
      }
      if (text === '') fail('value expected');
      put(JSON.parse(text));
    }
  };

  readValue();
  // Containers: read members until the stack is empty.
  const first = new WeakSet<object>();
  while (stack.length > 0) {
    const top = stack[stack.length - 1] as Frame;
    let c = skipSpace();
    const isFirst = !first.has(top.value);
    if ((top.kind === 'object' && c === 0x7d) || (top.kind === 'array' && c === 0x5d)) {
      i++;
      stack.pop();
      path.pop();
      continue;
    }
    if (!isFirst) {
      if (c !== 0x2c) fail('comma expected');
      i++;
      c = skipSpace();
    }
    first.add(top.value);
    if (top.kind === 'object') {
      if (c !== QUOTE) fail('key expected');
      i++;
      const key = decode(readString(Number.POSITIVE_INFINITY).raw);
      if (skipSpace() !== 0x3a) fail('colon expected');
      i++;
      top.key = key;
      path.push(key);
      const depth = stack.length;
      readValue();
      if (stack.length === depth) path.pop();
    } else {
      path.push(top.value.length);
      const depth = stack.length;
      readValue();
      if (stack.length === depth) path.pop();
    }
  }
  if (!done && stack.length > 0) fail('unexpected end');
  if (skipSpace() !== -1) fail('trailing bytes');
  return root;
}
