/**
 * Turning whatever a tool writes into valid UTF-8 chunks, cheaply. Bytes that
 * are already valid UTF-8 pass through untouched (the common case: one SIMD
 * validation, no decode/encode); invalid bytes are replaced with U+FFFD. A
 * character split between two writes is carried over, never split or replaced.
 */
import { isUtf8 } from 'node:buffer';

const decoder = new TextDecoder('utf-8', { fatal: false });

/** Start of an incomplete multi-byte sequence at the end of `b`, or `b.length` when it ends complete. */
export function incompleteTailStart(b: Uint8Array): number {
  const len = b.length;
  for (let i = len - 1; i >= 0 && i >= len - 4; i--) {
    const byte = b[i] as number;
    if ((byte & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    if (byte < 0xc0) return len; // ASCII (or a stray continuation run): nothing pending
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
    return len - i < need ? i : len;
  }
  return len;
}

/** Largest cut ≤ `max` in `b` that does not fall inside a multi-byte character (assumes valid UTF-8). */
export function codePointCut(b: Uint8Array, max: number): number {
  if (max >= b.length) return b.length;
  let cut = max;
  while (cut > 0 && ((b[cut] as number) & 0xc0) === 0x80) cut--;
  return cut === 0 ? max : cut;
}

/** Incremental UTF-8 sanitiser for byte input. */
export class Utf8Carry {
  private carry: Uint8Array | undefined;

  /** Returns the valid UTF-8 bytes ready to send; keeps an incomplete trailing character for next time. */
  push(chunk: Uint8Array): Uint8Array {
    let data = chunk;
    if (this.carry) {
      data = Buffer.concat([this.carry, chunk]);
      this.carry = undefined;
    }
    const cut = incompleteTailStart(data);
    if (cut < data.length) {
      // A copy (at most 3 bytes), not a view: the chunk's buffer may move to the engine or be reused by the tool.
      this.carry = Uint8Array.prototype.slice.call(data, cut);
      data = data.subarray(0, cut);
    }
    return isUtf8(data) ? data : Buffer.from(decoder.decode(data), 'utf8');
  }

  /** Flushes a dangling incomplete character as U+FFFD. */
  end(): Uint8Array {
    const c = this.carry;
    this.carry = undefined;
    return c ? Buffer.from(decoder.decode(c), 'utf8') : new Uint8Array(0);
  }
}

/** Incremental encoder for string input: a high surrogate at the end of one write waits for its pair. */
export class StringCarry {
  private pending = '';

  /** UTF-8 bytes of the complete part of `s`. */
  push(s: string): Uint8Array {
    let text = this.pending + s;
    this.pending = '';
    const last = text.charCodeAt(text.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) {
      this.pending = text.slice(-1);
      text = text.slice(0, -1);
    }
    return Buffer.from(text, 'utf8');
  }

  /** A dangling high surrogate, as U+FFFD. */
  end(): Uint8Array {
    const p = this.pending;
    this.pending = '';
    return p ? Buffer.from(p, 'utf8') : new Uint8Array(0);
  }
}
