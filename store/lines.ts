/**
 * The line rule shared by capture, previews and paged reads: lines end at
 * `\n`; a final `\n` ends the last line rather than starting a new one. So
 * `""` has 0 lines, `"a"` 1, `"a\n"` 1 and `"a\nb"` 2. `\r` is content.
 */

const LF = 0x0a;

/** Counts `\n` bytes in `buf[start, end)`. A plain loop: V8 compiles it tight, and it beats indexOf on dense lines. */
export function countNewlines(buf: Uint8Array, start = 0, end = buf.length): number {
  let n = 0;
  for (let i = start; i < end; i++) if (buf[i] === LF) n++;
  return n;
}

/** Number of lines in a stream of `bytes` bytes containing `newlines` `\n`, whose last byte is `lastByte`. */
export function lineCount(bytes: number, newlines: number, endsWithNewline: boolean): number {
  if (bytes === 0) return 0;
  return endsWithNewline ? newlines : newlines + 1;
}

/** Number of lines in a string, by the rule above. */
export function linesOfString(s: string): number {
  if (s.length === 0) return 0;
  let n = 0;
  let i = s.indexOf('\n');
  while (i !== -1) {
    n++;
    i = s.indexOf('\n', i + 1);
  }
  return s.endsWith('\n') ? n : n + 1;
}
