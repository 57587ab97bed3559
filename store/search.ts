/**
 * Searching a stored artifact like `grep -n`, zero-based: one pass in 2 MiB
 * reads (the next two under way while one is searched, store/search-reader.ts),
 * holding only those reads, the line crossed and the page. A literal
 * (ignoring ASCII case too) is found in the bytes at memchr speed
 * (store/needle.ts), and so are the candidates of a regular expression with a
 * required literal, whose lines alone are decoded and tested (RE2, linear);
 * a hit's line number comes from the line index entry before it and the
 * newlines between, so the bytes between hits are never counted. Other
 * regular expressions are matched in each read's text, in slices with a turn
 * of the event loop between. A page's matching time is bounded.
 */
import { BadArgumentsError, IntegrityError, ResourceLimitError } from '../engine/protocol/errors.js';
import { IndexCursor } from './index-cursor.js';
import { markIndexUnavailable, openVerifiedBlob, type VerifiedBlob } from './integrity.js';
import { ByteNeedle } from './needle.js';
import { lineStartByte, resolveArtifact } from './pages.js';
import { type ChunkEntry, type Matcher, Page, searchChunk } from './search-chunk.js';
import { ReadAhead, type ReadAheadShape } from './search-reader.js';
import { asciiFoldable, compileLinePattern, literalPattern } from './search-regex.js';
import type { Store } from './store.js';

/** Most matches in one page. */
export const MAX_SEARCH_LIMIT = 1000;
/** Matches in a page unless asked otherwise. */
export const DEFAULT_SEARCH_LIMIT = 100;
/** Most context lines on each side of a match. */
export const MAX_SEARCH_CONTEXT = 10;
export { MAX_SHOWN_LINE_BYTES } from './search-scanners.js';
/** A line is searched on its first this many bytes; longer lines are counted in `longLines`. */
export const SEARCH_LINE_WINDOW = 1024 * 1024;
/**
 * Bytes of one read of a search pass: larger reads cost fewer wake-ups of a
 * reading thread and of the pass, at the price of the bytes read ahead and
 * not searched when a page ends.
 */
export const SEARCH_READ_BYTES = 2 * 1024 * 1024;
/** Reads under way while one is searched: the reading thread always has the next read queued. */
const READ_DEPTH = 2;
const READ_SHAPE: ReadAheadShape = { readBytes: SEARCH_READ_BYTES, carryBytes: SEARCH_LINE_WINDOW, depth: READ_DEPTH };
const LF = 0x0a;
/** Matching time one page may spend, unless `SLUICE_SEARCH_BUDGET_MS` (docs/benchmarks.md, "Reads and search"). */
const DEFAULT_SEARCH_BUDGET_MS = 10_000;

function searchBudgetMs(): number {
  const v = Number(process.env.SLUICE_SEARCH_BUDGET_MS);
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_SEARCH_BUDGET_MS;
}

/** Bytes times cost per byte between turns of the event loop: 1 MiB for a small expression, at least 4 KiB. */
const SLICE_WORK = 1024 * 1024;

/** What to search for, and which page of results. */
export interface SearchOptions {
  /** The text to find (a regular expression with `regex`). Non-empty. */
  pattern: string;
  /** Treat `pattern` as a regular expression (RE2 syntax: docs/read.md, "Pattern dialect"). @default false */
  regex?: boolean;
  /** Ignore letter case. @default false */
  ignoreCase?: boolean;
  /** Lines of context before and after each match, 0 to 10. @default 0 */
  context?: number;
  /** Most matches in the page, 1 to 1000. @default 100 */
  limit?: number;
  /** Zero-based line to start searching at (a page's `nextOffset`). @default 0 */
  offset?: number;
  /** Stops the pass between reads (the error is the signal's reason). */
  signal?: AbortSignal;
}

/** One line of a result page. */
export interface SearchLine {
  /** Zero-based line number: `read(offset=line)` reads it. */
  line: number;
  /** The line's text without its `\n`, cut after {@link MAX_SHOWN_LINE_BYTES} (then `cut` is its full size). */
  text: string;
  /** True for a matching line, false for a context line. */
  match: boolean;
  /** When the shown text was cut: the line's stored size in bytes. */
  cut?: number;
}

/** One page of search results. */
export interface SearchPage {
  /** Matching and context lines in order; a gap between them is a `--` in the text form. */
  lines: SearchLine[];
  /** Matching lines in the page. */
  matches: number;
  /** The context asked for (groups are separated by `--` only with context, as in grep). */
  context: number;
  /** Lines in the whole artifact or stream. */
  totalLines: number;
  /** Where the next page starts (pass it as `offset`), or null when the search reached the end. */
  nextOffset: number | null;
  /** Lines longer than {@link SEARCH_LINE_WINDOW} that were searched only on their first part. */
  longLines: number;
  /** The digest in the URI (the manifest's, for a stream URI). */
  digest: string;
  /** The stream, for a stream URI. */
  stream?: string;
}

function count(name: string, v: number | undefined, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new BadArgumentsError(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`, {
      [name]: v,
    });
  }
  return v;
}

function compile(opts: SearchOptions): Matcher {
  if (typeof opts.pattern !== 'string' || opts.pattern.length === 0) {
    throw new BadArgumentsError('pattern must be a non-empty string', { pattern: String(opts.pattern) });
  }
  if (!opts.regex && opts.pattern.includes('\n')) {
    throw new BadArgumentsError('a pattern cannot contain a newline (lines are searched one by one)');
  }
  const ignoreCase = opts.ignoreCase === true;
  if (!opts.regex && (!ignoreCase || asciiFoldable(opts.pattern))) {
    return { needle: new ByteNeedle(Buffer.from(opts.pattern, 'utf8'), ignoreCase) };
  }
  const pattern = opts.regex ? compileLinePattern(opts.pattern, ignoreCase) : literalPattern(opts.pattern, ignoreCase);
  if (pattern.literal !== undefined) return { pattern, needle: new ByteNeedle(Buffer.from(pattern.literal, 'utf8')) };
  if (pattern.foldedBytes !== undefined)
    return { pattern, needle: new ByteNeedle(Buffer.from(pattern.foldedBytes), true) };
  return { pattern };
}

/** The index said something the blob's own line count contradicts: the page is searched again without it. */
class IndexDisagrees extends Error {}

/** Cost per byte of searching with `m`, which sizes a regular expression's slices. */
function costPerByte(m: Matcher): number {
  return m.pattern ? m.pattern.costPerByte : 1;
}

function yieldTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Searches the artifact at `uri` in O(read + line window + page) memory; read errors, EBADARGS. */
export async function searchArtifact(store: Store, uri: string, opts: SearchOptions): Promise<SearchPage> {
  const context = count('context', opts.context, 0, MAX_SEARCH_CONTEXT, 0);
  const limit = count('limit', opts.limit, 1, MAX_SEARCH_LIMIT, DEFAULT_SEARCH_LIMIT);
  const offset = count('offset', opts.offset, 0, Number.MAX_SAFE_INTEGER, 0);
  const matcher = compile(opts);
  const target = await resolveArtifact(store, uri);
  const blob = await openVerifiedBlob(store, target.blob);
  try {
    if (target.expectedBytes !== undefined && blob.bytes !== target.expectedBytes) {
      throw new IntegrityError(
        `artifact ${target.blob} has ${blob.bytes} bytes but its manifest records ${target.expectedBytes}`,
        { digest: target.blob, bytes: blob.bytes, expected: target.expectedBytes },
      );
    }
    let page = new Page(context, limit);
    let longLines = 0;
    let nextOffset: number | null = null;
    if (offset < blob.lines) {
      let r: { longLines: number; nextOffset: number | null };
      try {
        r = await scan(store, blob, offset, matcher, page, opts.signal);
      } catch (err) {
        if (!(err instanceof IndexDisagrees)) throw err;
        markIndexUnavailable(store, blob.digest);
        page = new Page(context, limit);
        r = await scan(store, blob, offset, matcher, page, opts.signal);
      }
      longLines = r.longLines;
      nextOffset = r.nextOffset;
    }
    return {
      lines: page.lines,
      matches: page.matches,
      context,
      totalLines: blob.lines,
      nextOffset,
      longLines,
      digest: target.digest,
      ...(target.stream === undefined ? {} : { stream: target.stream }),
    };
  } finally {
    await blob.close();
  }
}

async function scan(
  store: Store,
  blob: VerifiedBlob,
  offset: number,
  m: Matcher,
  page: Page,
  signal: AbortSignal | undefined,
): Promise<{ longLines: number; nextOffset: number | null }> {
  const position = await lineStartByte(store, blob, offset);
  // Only the byte scanner numbers lines from the index: the text one walks every newline anyway.
  const index = m.needle ? await IndexCursor.open(store, blob, { line: offset, byte: position }) : undefined;
  try {
    return await scanFrom(blob, position, offset, m, page, signal, index);
  } finally {
    await index?.close();
  }
}

// The pass itself, from the line start `position` (line `offset`).
async function scanFrom(
  blob: VerifiedBlob,
  startByte: number,
  offset: number,
  m: Matcher,
  page: Page,
  signal: AbortSignal | undefined,
  index: IndexCursor | undefined,
): Promise<{ longLines: number; nextOffset: number | null }> {
  const cost = costPerByte(m);
  const budgetMs = searchBudgetMs();
  let spentMs = 0;
  /** Searches one slice, adding the time it took to the page's matching time. */
  const timed = (f: () => { lines: number }): { lines: number } => {
    const t = performance.now();
    try {
      return f();
    } finally {
      spentMs += performance.now() - t;
    }
  };
  // True when the page must end at `at` (over budget, with matches); ERESOURCELIMIT over budget with none.
  const overBudget = (at: number): boolean => {
    if (spentMs <= budgetMs) return false;
    if (page.matches > 0) return true;
    throw new ResourceLimitError(
      `the search used its budget of ${budgetMs} ms of matching before finding a match; lines before ${at} were searched: continue with offset=${at}`,
      { limit: 'searchTime', budgetMs, offset: at },
    );
  };
  const reader = new ReadAhead(blob.handle, startByte, blob.bytes, READ_SHAPE);
  try {
    return await pass();
  } finally {
    // The blob is closed after this returns: no read may still be under way then.
    await reader.close();
  }

  async function pass(): Promise<{ longLines: number; nextOffset: number | null }> {
    let line = offset;
    let carry = 0;
    /** Inside a line longer than the window: its first part was searched, skip to its end. */
    let skipping = false;
    let longLines = 0;
    /** Whether line numbers came from the index, which the count at the end then checks. */
    let indexed = false;
    for (;;) {
      signal?.throwIfAborted();
      const { buf, base, end, atEof, start: carried } = await reader.next(carry);
      let start = carried;
      if (skipping) {
        const nl = buf.indexOf(LF, start);
        if (nl === -1 || nl >= end) {
          if (atEof) return { longLines, nextOffset: null };
          carry = 0;
          continue;
        }
        skipping = false;
        start = nl + 1;
        line++;
      }
      const lastNl = buf.lastIndexOf(LF, end - 1);
      const complete = atEof ? end : lastNl >= start ? lastNl + 1 : start;
      const rest = end - complete;
      const entries = index?.usable ? await chunkEntries(index, buf, base, start, complete, line) : [];
      indexed ||= entries.length > 0;
      let taken = 0;
      // A regular expression's text goes in slices of about SLICE_WORK, each ending at a newline.
      const slice = m.pattern ? Math.max(4096, Math.floor(SLICE_WORK / cost)) : complete - start;
      while (complete > start) {
        const nl = start + slice >= complete ? complete - 1 : buf.indexOf(LF, start + slice);
        const stop = nl === -1 || nl >= complete ? complete : nl + 1;
        const from = start;
        const inSlice: ChunkEntry[] = [];
        for (; taken < entries.length && (entries[taken] as ChunkEntry).at <= stop; taken++) {
          const e = entries[taken] as ChunkEntry;
          if (e.at >= from) inSlice.push({ at: e.at - from, line: e.line });
        }
        const r = timed(() => searchChunk(buf.subarray(from, stop), line, m, page, false, inSlice));
        if (page.full || (page.matches >= page.limit && page.after === 0)) {
          return { longLines, nextOffset: nextAfter(page, r.lines + line, blob.lines) };
        }
        line += r.lines;
        start = stop;
        if (!(atEof && start >= complete) && overBudget(line)) return { longLines, nextOffset: line };
        if (m.pattern && start < complete) {
          await yieldTurn();
          signal?.throwIfAborted();
        }
      }
      if (atEof) {
        if (indexed && line !== blob.lines) throw new IndexDisagrees();
        return { longLines, nextOffset: null };
      }
      if (rest >= SEARCH_LINE_WINDOW) {
        // A line longer than the window: search its first part alone, then skip the rest of it.
        longLines++;
        const part = buf.subarray(complete, complete + SEARCH_LINE_WINDOW);
        timed(() => searchChunk(part, line, m, page, true));
        if (page.full || (page.matches >= page.limit && page.after === 0)) {
          return { longLines, nextOffset: nextAfter(page, line + 1, blob.lines) };
        }
        // The long line was searched as far as it ever is: a page cut here continues after it.
        if (line + 1 < blob.lines && overBudget(line + 1)) return { longLines, nextOffset: line + 1 };
        skipping = true;
        carry = 0;
        continue;
      }
      carry = rest;
    }
  }
}

/**
 * The index entries in `buf[start, complete]` (the complete lines about to
 * be searched, `base` the blob offset of `buf[0]`, `line` the number of the
 * line at `start`), each checked to follow a `\n` and to leave a byte per
 * line since `start`; the first that fails ends the index for this pass.
 */
async function chunkEntries(
  index: IndexCursor,
  buf: Buffer,
  base: number,
  start: number,
  complete: number,
  line: number,
): Promise<ChunkEntry[]> {
  const out: ChunkEntry[] = [];
  for (const e of await index.upTo(base + complete)) {
    const at = e.byte - base;
    const ok =
      at === start ? e.line === line : at > start && buf[at - 1] === LF && e.line > line && e.line - line <= at - start;
    if (!ok) {
      index.fail();
      return [];
    }
    out.push({ at, line: e.line });
  }
  return out;
}

/** The next page's offset once this one is full: past the last match, or where the byte bound stopped it. */
function nextAfter(page: Page, scanned: number, total: number): number | null {
  const lastMatch = [...page.lines].reverse().find((l) => l.match);
  const next = page.stopAt ?? (lastMatch ? lastMatch.line + 1 : scanned);
  return next < total ? next : null;
}
