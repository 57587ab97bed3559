/**
 * Regular expressions over stored output in linear time: RE2 syntax (re2js),
 * so no pattern a model sends can stall its thread (JavaScript's RegExp
 * backtracks for minutes on `(a+)+$`). What RE2 cannot match linearly
 * (backreferences, lookaround) is EBADARGS naming the construct. A block of
 * lines is tested at once (multi-line), and only a matching block line by
 * line; a block match is a superset of its lines' matches except with `\A`,
 * `\z` or a group clearing `m`, which are tested line by line throughout.
 */
import { RE2JS } from 're2js';
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { type Scanner, textLines } from './search-scanners.js';

/** A compiled pattern: the per-line matcher, and the block filter unless the pattern has `\A` or `\z`. */
export interface LinePattern {
  /** Text every match contains ({@link requiredLiteral}): lines without it are never tested. */
  readonly literal: string | undefined;
  /** A case-insensitive literal as a plain RegExp (which no input can make backtrack) to find candidates. */
  readonly foldedLiteral: RegExp | undefined;
  /** That literal's text when {@link asciiFoldable}: its candidates can be found in the bytes instead. */
  readonly foldedBytes: string | undefined;
  /** Matches one line (its text without the `\n`). */
  readonly line: RE2JS;
  /** Multi-line, for a block of lines; undefined when blocks cannot be filtered. */
  readonly block: RE2JS | undefined;
  /** Sizes the slices between event-loop turns: a rough bound of RE2's NFA's slowest per-byte work. */
  readonly costPerByte: number;
}

/** Programs larger than this (RE2 instructions) are refused: each byte could cost that many steps. */
const MAX_PROGRAM_SIZE = 20_000;

/** Bytes of lines tested as one block (a block ends at the first newline after this many). */
const BLOCK_BYTES = 16 * 1024;

/** What the constructs RE2 refuses are, by the text of its error. */
const UNSUPPORTED: Array<[RegExp, string]> = [
  [/invalid escape sequence: `\\[1-9]`/, 'a backreference (\\1 to \\9)'],
  [/invalid escape sequence: `\\k`/, 'a named backreference (\\k<name>)'],
  [/unsupported Perl syntax: `\(\?[=!]`/, 'a lookahead ((?=…) or (?!…))'],
  [/invalid named capture: `\(\?<[=!]/, 'a lookbehind ((?<=…) or (?<!…))'],
  [/unsupported Perl syntax: `\(\?>`/, 'an atomic group ((?>…))'],
  [/invalid nested repetition operator: `[*+?}]\+`/, 'a possessive quantifier (*+, ++, ?+)'],
  [/invalid escape sequence: `\\u`/, 'a \\u escape (write \\x{263A}, or the character itself)'],
];

/** EBADARGS for a pattern RE2 refuses (naming the construct) and for a program over MAX_PROGRAM_SIZE. */
export function compileLinePattern(source: string, ignoreCase: boolean): LinePattern {
  const flags = ignoreCase ? RE2JS.CASE_INSENSITIVE : 0;
  let line: RE2JS;
  try {
    line = RE2JS.compile(source, flags);
  } catch (err) {
    const message = (err as Error).message.replace(/^error parsing regexp: /, '');
    const construct = UNSUPPORTED.find(([re]) => re.test(message))?.[1];
    if (construct) {
      throw new BadArgumentsError(
        `the pattern uses ${construct}, which sluice's regular expressions do not support: they are RE2 syntax, matched in linear time (docs/read.md, "Pattern dialect")`,
        { pattern: source, unsupported: construct },
      );
    }
    throw new BadArgumentsError(`pattern is not a valid regular expression (RE2 syntax): ${message}`, {
      pattern: source,
    });
  }
  const size = line.programSize();
  if (size > MAX_PROGRAM_SIZE) {
    throw new BadArgumentsError(
      `the pattern compiles to ${size} RE2 instructions, over the bound of ${MAX_PROGRAM_SIZE}: use fewer or smaller counted repetitions`,
      { pattern: source, programSize: size, bound: MAX_PROGRAM_SIZE },
    );
  }
  // `\A` and `\z`, and `(?-m)` (which makes `^` and `$` the block's ends), hold differently in a block
  // than in a line (so does a backslash before an A or z that is itself escaped: that only costs speed).
  const absolute = /\\[Az]|\(\?[a-zA-Z]*-/.test(source);
  const block = absolute ? undefined : RE2JS.compile(source, flags | RE2JS.MULTILINE);
  const required = requiredLiteral(source);
  const literal = ignoreCase ? undefined : required;
  // `u`: JavaScript folds case by Unicode's simple case folding then, as RE2 does (K and the Kelvin sign).
  const foldedLiteral =
    ignoreCase && required !== undefined
      ? new RegExp(required.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'), 'giu')
      : undefined;
  const foldedBytes = ignoreCase && required !== undefined && asciiFoldable(required) ? required : undefined;
  return { line, block, literal, foldedLiteral, foldedBytes, costPerByte: Math.max(1, Math.ceil(size / 4)) };
}

/**
 * Whether RE2's case folding of `text` is ASCII's: ASCII, with no `k` or `s`
 * (Unicode folds them with the Kelvin sign and the long s too), so its
 * case-insensitive matches are found in the bytes with ASCII folding.
 */
export function asciiFoldable(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= 0x80) return false;
  return !/[ks]/i.test(text);
}

/** Characters that are themselves in RE2 syntax outside a class. */
const PLAIN = /[^\\.+*?()|[\]{}^$]/;

/**
 * The longest literal run (2 or more) every match of `source` contains, read
 * conservatively off the top level: a wrong answer can only be too short (a
 * slower search), never text a match might lack (test/builtins/grep-redos.test.ts).
 */
export function requiredLiteral(source: string): string | undefined {
  if (source.includes('(?')) return undefined;
  let best = '';
  let run = '';
  const end = () => {
    if (run.length > best.length) best = run;
    run = '';
  };
  let depth = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i] as string;
    if (c === '\\') {
      const n = source[i + 1];
      if (n === undefined) return undefined;
      i++;
      // Escapes whose extent this reading does not follow (\Q…\E, \x{…}, \p{…}, octal \101): no literal.
      if (/[0-9QxpP]/.test(n)) return undefined;
      if (depth === 0 && /[!-/:-@[-`{-~]/.test(n)) run += n;
      else if (depth === 0) end();
      continue;
    }
    if (c === '[') {
      // A class: skipped to its closing bracket (a ']' first, or after '^', is a member; so is a
      // `[:name:]` inside it, whose `]` does not close it).
      end();
      let j = i + 1;
      if (source[j] === '^') j++;
      if (source[j] === ']') j++;
      for (; j < source.length && source[j] !== ']'; j++) {
        if (source[j] === '\\') j++;
        else if (source[j] === '[' && source[j + 1] === ':') {
          const close = source.indexOf(':]', j + 2);
          if (close === -1) return undefined;
          j = close + 1;
        }
      }
      if (j >= source.length) return undefined;
      i = j;
      continue;
    }
    if (c === '(') {
      depth++;
      end();
      continue;
    }
    if (c === ')') {
      depth--;
      continue;
    }
    if (depth > 0) {
      continue;
    }
    if (c === '|') return undefined;
    if (c === '*' || c === '?' || c === '{' || c === '+') {
      // The quantifier applies to the run's last character: `+` keeps it (at least one), the rest drop it
      // (both halves of a surrogate pair: a lone half would be no text at all).
      if (c !== '+') run = run.slice(0, /[\uD800-\uDBFF][\uDC00-\uDFFF]$/.test(run) ? -2 : -1);
      end();
      if (c === '{') while (i < source.length && source[i] !== '}') i++;
      continue;
    }
    // U+FFFD is also what invalid UTF-8 decodes to: as bytes it would miss those lines.
    if (PLAIN.test(c) && c !== '\uFFFD') run += c;
    else end();
  }
  if (depth !== 0) return undefined;
  end();
  return best.length >= 2 ? best : undefined;
}

/** A pattern that matches `literal` exactly (a case-insensitive literal search). */
export function literalPattern(literal: string, ignoreCase: boolean): LinePattern {
  return compileLinePattern(RE2JS.quote(literal), ignoreCase);
}

/** Candidates are the starts of matching lines, so the caller's line test is already answered. */
export function regexScanner(text: string, p: LinePattern): Scanner {
  const base = textLines(text);
  /** The line start `find` returned last, whose line is known to match. */
  let found = -1;
  const testLine = (start: number, end: number) => p.line.test(text.slice(start, end));
  /** First matching line at or after `pos`, in `[pos, stop)` (line-aligned), or -1. */
  const lineIn = (pos: number, stop: number): number => {
    for (let s = pos; s < stop; ) {
      const nl = text.indexOf('\n', s);
      const e = nl === -1 || nl >= stop ? stop : nl;
      if (testLine(s, e)) return s;
      s = e + 1;
    }
    return -1;
  };
  return {
    ...base,
    find: (from) => {
      // `from` may be inside a line (after-context): that line's match was already decided.
      let pos = from === 0 || text.charCodeAt(from - 1) === 0x0a ? from : text.indexOf('\n', from) + 1 || text.length;
      const folded = p.foldedLiteral;
      if (folded) {
        // Only lines holding the text (ignoring case) can match: each one found is tested whole.
        while (pos < text.length) {
          folded.lastIndex = pos;
          const hit = folded.exec(text);
          if (!hit) return -1;
          const s = text.lastIndexOf('\n', hit.index - 1) + 1;
          const nl = text.indexOf('\n', hit.index);
          const e = nl === -1 ? text.length : nl;
          if (s >= pos && testLine(s, e)) {
            found = s;
            return s;
          }
          pos = e + 1;
        }
        return -1;
      }
      while (pos < text.length) {
        const nl = text.indexOf('\n', Math.min(pos + BLOCK_BYTES, text.length));
        const stop = nl === -1 ? text.length : nl + 1;
        if (p.block === undefined || p.block.test(text.slice(pos, stop))) {
          const at = lineIn(pos, stop);
          if (at !== -1) {
            found = at;
            return at;
          }
        }
        pos = stop;
      }
      return -1;
    },
    test: (start, end) => start === found || testLine(start, end),
    matchLine: testLine,
  };
}
