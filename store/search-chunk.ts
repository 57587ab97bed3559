/**
 * One searched span of a read (store/search.ts): its candidates found and
 * tested, their lines numbered from the cursor or the nearest index entry,
 * context lines collected, all into the page, which bounds its own size.
 */

import type { ByteNeedle } from './needle.js';
import { MAX_PAGE_BYTES } from './page-options.js';
import type { SearchLine } from './search.js';
import type { LinePattern } from './search-regex.js';
import { regexScanner } from './search-regex.js';
import { byteScanner, countLf } from './search-scanners.js';

const LF = 0x0a;

// With both, the pattern's matches all contain the literal: only the lines of its candidates are decoded.
export type Matcher = { needle: ByteNeedle; pattern?: LinePattern } | { needle?: ByteNeedle; pattern: LinePattern };

/** A line index entry inside the bytes being searched: `at` is a position there. */
export interface ChunkEntry {
  at: number;
  line: number;
}

/** Collects the page: context bookkeeping, gaps, the match limit and the page's byte bound. */
export class Page {
  readonly lines: SearchLine[] = [];
  matches = 0;
  bytes = 0;
  last = -1;
  after = 0;
  stopAt: number | undefined;
  before: SearchLine[] = [];

  constructor(
    readonly context: number,
    readonly limit: number,
  ) {}

  private cost(l: SearchLine): number {
    return Buffer.byteLength(l.text, 'utf8') + String(l.line).length + 40;
  }

  /** Adds a line; false (and `stopAt` set) when it does not fit the byte bound. */
  push(l: SearchLine): boolean {
    if (l.line <= this.last) return true;
    const c = this.cost(l);
    if (this.bytes + c > MAX_PAGE_BYTES) {
      this.stopAt = l.line;
      return false;
    }
    this.bytes += c;
    this.lines.push(l);
    this.last = l.line;
    if (l.match) this.matches++;
    return true;
  }

  get full(): boolean {
    return this.stopAt !== undefined;
  }
}

// Returns the lines of `chunk` searched; `partial`: the chunk is the first part of one long line.
// `entries`: index entries in `chunk` (positions there), so lines between hits need not be counted.
export function searchChunk(
  chunk: Buffer,
  base: number,
  m: Matcher,
  page: Page,
  partial = false,
  entries: readonly ChunkEntry[] = [],
): { lines: number } {
  const line = m.pattern?.line;
  const s = m.needle
    ? byteScanner(chunk, chunk.length, m.needle, line && ((text) => line.test(text)))
    : regexScanner(chunk.toString('utf8'), m.pattern as LinePattern);
  const endsWithLf = chunk[chunk.length - 1] === LF;
  let cursor = 0;
  let cursorLine = base;
  let entry = 0;
  const lineAt = (pos: number): number => {
    // From the last index entry at or before `pos` when it is past the cursor, else from the cursor.
    for (; entry < entries.length && (entries[entry] as ChunkEntry).at <= pos; entry++) {
      const e = entries[entry] as ChunkEntry;
      if (e.at > cursor) {
        cursor = e.at;
        cursorLine = e.line;
      }
    }
    cursorLine += s.newlines(cursor, pos);
    cursor = pos;
    return cursorLine;
  };
  // The cursor counts on from the last match or index entry, so each byte is counted at most once.
  const lines = (): { lines: number } => {
    if (partial) return { lines: 1 };
    if (m.needle) {
      // Past the end: the last line, which has no `\n`, matched and is already counted.
      const counted = cursor > s.length;
      return { lines: lineAt(s.length) - base + (endsWithLf || counted ? 0 : 1) };
    }
    // Text positions are UTF-16 units; count the rest on the bytes instead of walking the string.
    return { lines: countLf(chunk, 0, chunk.length) + (endsWithLf ? 0 : 1) };
  };
  const lineBounds = (pos: number): { start: number; end: number } => {
    const p = s.prev(pos);
    const n = partial ? -1 : s.next(pos);
    return { start: p + 1, end: n === -1 ? s.length : n };
  };
  const shown = (n: number, start: number, end: number, match: boolean): SearchLine => {
    const t = s.text(start, end);
    return { line: n, text: t.text, match, ...(t.cut !== undefined ? { cut: t.cut } : {}) };
  };
  let from = 0;
  let lineNo = base;
  const emitAfter = (): boolean => {
    while (page.after > 0 && from < s.length) {
      const b = lineBounds(from);
      const isMatch = s.matchLine(b.start, b.end);
      if (isMatch && page.matches >= page.limit) {
        page.after = 0;
        return false;
      }
      if (!page.push(shown(lineNo, b.start, b.end, isMatch))) return false;
      page.after = isMatch ? page.context : page.after - 1;
      from = b.end + 1;
      lineNo++;
      cursor = from;
      cursorLine = lineNo;
    }
    return true;
  };
  if (!emitAfter()) return lines();
  while (!page.full && page.matches < page.limit) {
    const at = s.find(from);
    if (at === -1) break;
    const b = lineBounds(at);
    const n = lineAt(b.start);
    if (!s.test(b.start, b.end)) {
      from = b.end + 1;
      continue;
    }
    const ctx: SearchLine[] = [];
    let ls = b.start;
    for (let k = 1; k <= page.context && n - k > page.last; k++) {
      if (ls > 0) {
        const p = s.prev(ls - 1);
        ctx.unshift(shown(n - k, p + 1, ls - 1, false));
        ls = p + 1;
      } else {
        const carried = page.before.find((l) => l.line === n - k);
        if (carried) ctx.unshift(carried);
      }
    }
    for (const c of ctx) if (!page.push(c)) return lines();
    if (!page.push(shown(n, b.start, b.end, true))) return lines();
    page.after = page.context;
    from = b.end + 1;
    lineNo = n + 1;
    cursor = from;
    cursorLine = lineNo;
    if (!emitAfter()) return lines();
  }
  if (page.context > 0 && !partial) {
    const keep: SearchLine[] = [];
    const total = lines().lines;
    let e = s.length;
    if (endsWithLf) e = s.length - 1;
    for (let k = 0; k < page.context && e >= 0; k++) {
      const p = s.prev(e);
      keep.unshift(shown(base + total - 1 - k, p + 1, e, false));
      if (p < 0) break;
      e = p;
    }
    page.before = [...page.before, ...keep].slice(-page.context);
  }
  return lines();
}
