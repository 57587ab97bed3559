/**
 * The two ways a search reads one read of a blob: as bytes (a literal,
 * or a regular expression's required literal, found by store/needle.ts at
 * memchr speed) or as text (a regular expression without a literal the bytes
 * can be searched for, store/search-regex.ts), behind one interface so the
 * search's line bookkeeping (store/search.ts) is written once.
 */
import { detachString, utf8PrefixEnd } from '../engine/protocol/text.js';
import type { ByteNeedle } from './needle.js';
import { newlineFinder } from './newline-simd.js';

const LF = 0x0a;
/** A shown line is cut after this many bytes (its text; the line itself is in the artifact). */
export const MAX_SHOWN_LINE_BYTES = 2000;

/** A line matcher over one of the two representations of a read. */
export interface Scanner {
  /** First candidate position at or after `from`, or -1. */
  find(from: number): number;
  /** Whether the line `[start, end)` matches (a candidate found by `find` may span lines). */
  test(start: number, end: number): boolean;
  /** Whether the line `[start, end)` holds a match, searching that line only. */
  matchLine(start: number, end: number): boolean;
  next(from: number): number;
  prev(before: number): number;
  text(start: number, end: number): { text: string; cut?: number };
  newlines(start: number, end: number): number;
  readonly length: number;
}

/** Spans at least this long are counted by the SIMD newline finder (copied into its memory first). */
const SIMD_COUNT_BYTES = 4096;

/**
 * `\n` bytes in `buf[start, end)`: WebAssembly SIMD for a long span (~5x
 * the loop below on short lines), else memchr through indexOf, ~3x the
 * plain loop on this pass's lines.
 */
export function countLf(buf: Buffer, start: number, end: number): number {
  const f = end - start >= SIMD_COUNT_BYTES ? newlineFinder() : undefined;
  if (f !== undefined) {
    let total = 0;
    for (let at = start; at < end; at += f.capacity) {
      const n = Math.min(f.capacity, end - at);
      f.bytes.set(buf.subarray(at, at + n), 0);
      // Asked for a newline past any there can be, the finder answers -1 - count.
      total += -1 - f.nth(0, n, f.capacity + 1);
    }
    return total;
  }
  let n = 0;
  for (let i = buf.indexOf(LF, start); i !== -1 && i < end; i = buf.indexOf(LF, i + 1)) n++;
  return n;
}

function cutText(text: string, storedBytes: number): { text: string; cut?: number } {
  if (storedBytes <= MAX_SHOWN_LINE_BYTES) return { text };
  const end = utf8PrefixEnd(text, MAX_SHOWN_LINE_BYTES).end;
  return { text: text.slice(0, end), cut: storedBytes };
}

/**
 * Candidates are the places `needle` occurs. With `line`, a regular
 * expression every match of which contains the needle (store/search-regex.ts),
 * a candidate's line is decoded and tested; without it the needle is the
 * pattern. Only candidates' lines (and context lines) are ever decoded.
 */
export function byteScanner(buf: Buffer, len: number, needle: ByteNeedle, line?: (text: string) => boolean): Scanner {
  const has = (start: number, end: number) => needle.find(buf, start, end) !== -1;
  const matches = line
    ? (start: number, end: number) => has(start, end) && line(buf.toString('utf8', start, end))
    : has;
  return {
    length: len,
    find: (from) => needle.find(buf, from, len),
    test: line ? (start, end) => line(buf.toString('utf8', start, end)) : () => true,
    matchLine: matches,
    next: (from) => {
      const at = buf.indexOf(LF, from);
      return at === -1 || at >= len ? -1 : at;
    },
    prev: (before) => (before <= 0 ? -1 : buf.lastIndexOf(LF, before - 1)),
    text: (start, end) => {
      const stored = end - start;
      const shown = Math.min(stored, MAX_SHOWN_LINE_BYTES + 4);
      return cutText(buf.toString('utf8', start, start + shown), stored);
    },
    newlines: (start, end) => countLf(buf, start, end),
  };
}

/**
 * The line bookkeeping of a read decoded to text (a regular expression or a
 * case-insensitive search); store/search-regex.ts adds the matching.
 */
export function textLines(text: string): Omit<Scanner, 'find' | 'test' | 'matchLine'> {
  return {
    length: text.length,
    next: (from) => text.indexOf('\n', from),
    prev: (before) => (before <= 0 ? -1 : text.lastIndexOf('\n', before - 1)),
    text: (start, end) => {
      // Detached: a slice would keep the whole read's string alive as long as the page holds the line.
      const cut = cutText(text.slice(start, end), Buffer.byteLength(text.slice(start, end), 'utf8'));
      return { ...cut, text: detachString(cut.text) };
    },
    newlines: (start, end) => {
      let n = 0;
      for (let i = text.indexOf('\n', start); i !== -1 && i < end; i = text.indexOf('\n', i + 1)) n++;
      return n;
    },
  };
}
