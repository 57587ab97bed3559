/**
 * Finding a literal in bytes at memchr speed, as grep and ripgrep do: the
 * needle's rarest byte (by a fixed ranking of bytes in logs, code and
 * text) is looked for with `Buffer.indexOf` of one byte (memchr), and each
 * place it occurs is checked against the whole needle. A needle whose
 * rarest byte turns out common in the data falls back to `Buffer.indexOf`
 * of the needle (Boyer-Moore-Horspool, ~4x slower on text than memchr, but
 * never one check per byte). An ASCII needle can be matched ignoring ASCII
 * case (both cases of a letter are looked for).
 */

/** Bytes from the most to the least common in logs, code and English text; unlisted bytes rank after them. */
const BY_FREQUENCY =
  ' etaonisrlhdcupm0f1g.2ywb/-:_v,=3546789k"x)(TSEAIRNOCL\'D>P<M;jBFq*UGzH]W[{}VK+Y#J$XQZ|\\`&%!@~^?\t\r';
/** Where bytes of 0x80 and above rank: UTF-8 text repeats its lead and continuation bytes. */
const HIGH_BYTE_RANK = 40;

const RANK = (() => {
  const rank = new Uint16Array(256);
  for (let b = 0; b < 256; b++) rank[b] = b >= 0x80 ? HIGH_BYTE_RANK : 256 + b;
  for (let i = 0; i < BY_FREQUENCY.length; i++) rank[BY_FREQUENCY.charCodeAt(i)] = i;
  return rank;
})();

/** Checks of a rare byte that did not start the needle, before the finder judges the byte common. */
const MISSES_BEFORE_JUDGING = 32;
/** The rare byte is common when it misses more than once per this many bytes searched. */
const BYTES_PER_MISS = 256;

const isAsciiLetter = (b: number) => (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a);
const lower = (b: number) => (b >= 0x41 && b <= 0x5a ? b | 0x20 : b);

/** A literal to find in byte buffers; reusable across buffers and calls. */
export class ByteNeedle {
  /** The needle as given (lowered when `foldAscii`). */
  readonly bytes: Buffer;
  readonly foldAscii: boolean;
  /** Index of the needle's rarest byte, and that byte in each case (the same byte when not a folded letter). */
  private readonly at: number;
  private readonly rareA: number;
  private readonly rareB: number;
  /** Set once the rare byte proves common: `Buffer.indexOf` of the needle from then on (not when folding). */
  private native = false;
  private misses = 0;
  private searched = 0;

  /** `foldAscii` needs an ASCII needle: its letters then match either case, every other byte itself. */
  constructor(needle: Buffer, foldAscii = false) {
    if (needle.length === 0) throw new RangeError('an empty needle');
    if (foldAscii && needle.some((b) => b >= 0x80)) throw new RangeError('folding case needs an ASCII needle');
    this.foldAscii = foldAscii;
    this.bytes = foldAscii ? Buffer.from(needle.map(lower)) : needle;
    let at = 0;
    for (let i = 1; i < needle.length; i++) {
      if ((RANK[needle[i] as number] as number) > (RANK[needle[at] as number] as number)) at = i;
    }
    this.at = at;
    const b = this.bytes[at] as number;
    this.rareA = b;
    this.rareB = foldAscii && isAsciiLetter(b) ? b & ~0x20 : b;
  }

  /** True when `buf[pos, pos + length)` is the needle. */
  private matchesAt(buf: Buffer, pos: number): boolean {
    const n = this.bytes;
    if (this.foldAscii) {
      for (let j = 0; j < n.length; j++) if (lower(buf[pos + j] as number) !== n[j]) return false;
    } else {
      for (let j = 0; j < n.length; j++) if (buf[pos + j] !== n[j]) return false;
    }
    return true;
  }

  /** Start of the first occurrence in `buf[from, end)` that ends by `end`, or -1. */
  find(buf: Buffer, from: number, end: number): number {
    const len = this.bytes.length;
    if (end - from < len) return -1;
    if (this.native) {
      const at = buf.indexOf(this.bytes, from);
      return at === -1 || at + len > end ? -1 : at;
    }
    const k = this.at;
    const last = end - len + k;
    let nextA = -2;
    let nextB = -2;
    for (let p = from + k; p <= last; ) {
      // Each case's next place is kept until passed, so neither case is scanned twice.
      if (nextA !== -1 && nextA < p) nextA = buf.indexOf(this.rareA, p);
      if (this.rareB !== this.rareA && nextB !== -1 && nextB < p) nextB = buf.indexOf(this.rareB, p);
      const i = nextB < 0 ? nextA : nextA < 0 ? nextB : Math.min(nextA, nextB);
      if (i === -1 || i > last) {
        this.searched += end - p;
        return -1;
      }
      if (this.matchesAt(buf, i - k)) {
        this.searched += i - p;
        return i - k;
      }
      this.searched += i + 1 - p;
      p = i + 1;
      if (++this.misses >= MISSES_BEFORE_JUDGING && !this.foldAscii) {
        if (this.misses * BYTES_PER_MISS > this.searched) {
          this.native = true;
          return this.find(buf, i - k + 1, end);
        }
        this.misses = 0;
        this.searched = 0;
      }
    }
    return -1;
  }
}
