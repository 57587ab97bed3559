/**
 * The skeleton of a spilled MCP message (spill.ts): its JSON parsed from
 * the spill file a chunk at a time, except that the large parts of a tool
 * result stay in the file. A string at a {@link spillablePlace} longer than
 * {@link SPAN_MIN_BYTES} escaped bytes (a text, an image's or audio's
 * base64, an embedded resource's text or blob), or any such string once
 * {@link HELD_CONTENT_BYTES} of them are held, becomes `span(…)`, and
 * `result.structuredContent`, whatever its size, becomes `raw(…)`: its JSON
 * bytes are checked but never built into a value. The parser is a
 * generator that yields when it needs the next chunk, so reads are
 * asynchronous without a promise per byte.
 */

/** Strings at a spillable place longer than this (escaped bytes) stay in the file. */
export const SPAN_MIN_BYTES = 64 * 1024;
/**
 * Bytes of a message's content strings held in the skeleton: past them,
 * every further content string stays in the file whatever its size, so
 * thousands of strings each under {@link SPAN_MIN_BYTES} are not a whole
 * output in memory.
 */
export const HELD_CONTENT_BYTES = 4 * 1024 * 1024;
/**
 * Bytes held of everything else (keys, literals, strings at other places,
 * and a few bytes per value for its structure): the SDK needs those whole,
 * so past this the message is refused ({@link HeldLimitError}).
 */
export const MAX_HELD_BYTES = 16 * 1024 * 1024;
/** What each value held costs against {@link MAX_HELD_BYTES} beside its bytes (its object or slot). */
const VALUE_COST = 16;

/** A spilled message would hold more than {@link MAX_HELD_BYTES} outside its content (ERESOURCELIMIT, not bad JSON). */
export class HeldLimitError extends Error {
  override readonly name = 'HeldLimitError';
}

const READ_CHUNK = 256 * 1024;

/** A span of bytes in a spill file: JSON-escaped string bytes (quotes excluded), or a raw JSON value. */
export interface SpillSpan {
  start: number;
  end: number;
}

/** Reads up to `length` bytes at `position` into `buf` at 0; resolves to the count (0 at the end). */
export type PositionalRead = (buf: Buffer, length: number, position: number) => Promise<number>;

/** Where a string may stay in the file: result.content[i] `text` or `data`, or its resource's `text` or `blob`. */
export function spillablePlace(path: readonly (string | number)[]): boolean {
  if (path[0] !== 'result' || path[1] !== 'content' || typeof path[2] !== 'number') return false;
  if (path.length === 4) return path[3] === 'text' || path[3] === 'data';
  return path.length === 5 && path[3] === 'resource' && (path[4] === 'text' || path[4] === 'blob');
}

/** Whether the value about to be read is a tool result's structured content (kept as raw bytes). */
function rawPlace(path: readonly (string | number)[]): boolean {
  return path.length === 2 && path[0] === 'result' && path[1] === 'structuredContent';
}

type Frame =
  | { kind: 'object'; value: Record<string, unknown>; key: string | undefined }
  | { kind: 'array'; value: unknown[] };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** What the parser makes of the file's large parts. */
export interface SkeletonHooks {
  /** A large string: the value standing for it. */
  span(s: SpillSpan): unknown;
  /** The structured content: the value standing for it. */
  raw(s: SpillSpan): unknown;
}

/**
 * Parses the JSON text of `size` bytes read through `read`; rejects with a
 * SyntaxError for text that is not JSON. `chunkBytes` is the read size.
 */
export async function parseSkeleton(
  read: PositionalRead,
  size: number,
  hooks: SkeletonHooks,
  chunkBytes = READ_CHUNK,
): Promise<unknown> {
  const buf = Buffer.alloc(Math.min(chunkBytes, Math.max(size, 1)));
  const state = { base: 0, len: 0, i: 0, chunk: buf.subarray(0, 0) };
  const parser = parse(buf, size, state, hooks);
  for (let step = parser.next(); ; step = parser.next()) {
    if (step.done) return step.value;
    state.base += state.len;
    state.i = 0;
    state.len = state.base >= size ? 0 : await read(buf, Math.min(buf.length, size - state.base), state.base);
    state.chunk = buf.subarray(0, state.len);
  }
}

interface ReadState {
  base: number;
  len: number;
  i: number;
  chunk: Buffer;
}

/** The parser proper: yields to have the next chunk read into `buf` (state.len 0 at the end). */
function* parse(buf: Buffer, size: number, st: ReadState, hooks: SkeletonHooks): Generator<void, unknown> {
  const more = function* (): Generator<void, boolean> {
    if (st.base + st.len >= size) {
      // At the end: position past the last chunk so that offsets stay right.
      st.base += st.len;
      st.i = 0;
      st.len = 0;
      return false;
    }
    yield;
    return st.len > 0;
  };
  const find = (byte: number, from: number): number => {
    const at = st.chunk.indexOf(byte, from);
    return at === -1 ? st.len : at;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`bad JSON in a spilled MCP message at byte ${st.base + st.i}: ${what}`);
  };
  const skipSpace = function* (): Generator<void, number> {
    for (;;) {
      if (st.i >= st.len && !(yield* more())) return -1;
      const c = buf[st.i] as number;
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) st.i++;
      else return c;
    }
  };
  /**
   * Reads a string after its opening quote: where its escaped bytes start and
   * end, and those bytes while they are at most `limit` (null past it).
   */
  const readString = function* (limit: number): Generator<void, { raw: Buffer[] | null; start: number; end: number }> {
    const start = st.base + st.i;
    let raw: Buffer[] | null = limit > 0 ? [] : null;
    let kept = 0;
    let escaped = false;
    for (;;) {
      if (st.i >= st.len && !(yield* more())) fail('unterminated string');
      const { i, len, chunk } = st;
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
        st.i = end + 1;
        return { raw, start, end: st.base + end };
      }
      st.i = len;
    }
  };
  const decode = (raw: Buffer[] | null): string => {
    if (!raw) return fail('string too long');
    return JSON.parse(`"${Buffer.concat(raw).toString('utf8')}"`) as string;
  };

  const path: (string | number)[] = [];
  const stack: Frame[] = [];
  let root: unknown;
  /** Bytes held of content strings, and of everything else (see MAX_HELD_BYTES). */
  let heldContent = 0;
  let heldOther = 0;
  const hold = (bytes: number) => {
    heldOther += bytes + VALUE_COST;
    if (heldOther > MAX_HELD_BYTES) {
      throw new HeldLimitError(
        `a spilled MCP message holds more than ${MAX_HELD_BYTES} bytes outside its content (keys, values, structure)`,
      );
    }
  };
  /** Stack depth of the raw value being skipped (its members are checked, never kept); -1 outside one. */
  let rawDepth = -1;
  let rawStart = 0;
  const put = (v: unknown) => {
    if (rawDepth !== -1) return;
    const top = stack[stack.length - 1];
    if (!top) root = v;
    else if (top.kind === 'array') top.value.push(v);
    // As JSON.parse: an own property even for "__proto__" (an assignment would set the prototype).
    else
      Object.defineProperty(top.value, top.key as string, {
        value: v,
        writable: true,
        enumerable: true,
        configurable: true,
      });
  };
  /** A raw value has ended at the current position: its stand-in takes its place. */
  const endRaw = () => {
    rawDepth = -1;
    put(hooks.raw({ start: rawStart, end: st.base + st.i }));
  };
  const readValue = function* (): Generator<void, void> {
    const c = yield* skipSpace();
    if (rawDepth === -1 && rawPlace(path)) {
      rawDepth = stack.length;
      rawStart = st.base + st.i;
    }
    if (c === QUOTE) {
      st.i++;
      const content = rawDepth === -1 && spillablePlace(path);
      const limit =
        rawDepth !== -1
          ? 0
          : content
            ? heldContent < HELD_CONTENT_BYTES
              ? SPAN_MIN_BYTES
              : 0
            : Math.max(0, MAX_HELD_BYTES - heldOther);
      const s = yield* readString(limit);
      if (rawDepth === -1) {
        if (content) {
          if (s.raw) heldContent += s.end - s.start;
          put(s.raw ? decode(s.raw) : hooks.span({ start: s.start, end: s.end }));
          hold(0);
        } else {
          hold(s.end - s.start);
          put(decode(s.raw));
        }
      }
    } else if (c === 0x7b || c === 0x5b) {
      st.i++;
      const frame: Frame = c === 0x7b ? { kind: 'object', value: {}, key: undefined } : { kind: 'array', value: [] };
      if (rawDepth === -1) hold(0);
      put(frame.value);
      stack.push(frame);
      return;
    } else {
      let text = '';
      for (;;) {
        if (st.i >= st.len && !(yield* more())) break;
        const d = buf[st.i] as number;
        if (d === 0x2c || d === 0x7d || d === 0x5d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break;
        text += String.fromCharCode(d);
        st.i++;
        if (text.length > 400) fail('literal too long');
      }
      if (text === '') fail('value expected');
      if (rawDepth === -1) hold(text.length);
      put(JSON.parse(text));
    }
    if (rawDepth === stack.length) endRaw();
  };

  yield* readValue();
  // Containers: read members until the stack is empty.
  const first = new WeakSet<object>();
  while (stack.length > 0) {
    const top = stack[stack.length - 1] as Frame;
    let c = yield* skipSpace();
    const isFirst = !first.has(top.value);
    if ((top.kind === 'object' && c === 0x7d) || (top.kind === 'array' && c === 0x5d)) {
      st.i++;
      stack.pop();
      path.pop();
      if (rawDepth === stack.length) endRaw();
      continue;
    }
    if (c === -1) fail('unexpected end');
    if (!isFirst) {
      if (c !== 0x2c) fail('comma expected');
      st.i++;
      c = yield* skipSpace();
    }
    first.add(top.value);
    if (top.kind === 'object') {
      if (c !== QUOTE) fail('key expected');
      st.i++;
      const s = yield* readString(rawDepth !== -1 ? 0 : Math.max(0, MAX_HELD_BYTES - heldOther));
      if (rawDepth === -1) hold(s.end - s.start);
      const key = rawDepth !== -1 ? '' : decode(s.raw);
      if ((yield* skipSpace()) !== 0x3a) fail('colon expected');
      st.i++;
      top.key = key;
      path.push(key);
    } else {
      path.push(top.value.length);
    }
    const depth = stack.length;
    yield* readValue();
    if (stack.length === depth) path.pop();
  }
  if ((yield* skipSpace()) !== -1) fail('trailing bytes');
  return root;
}
