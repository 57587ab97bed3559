/**
 * Text a tool writes as JavaScript strings, encoded as UTF-8. Bytes a tool
 * writes (Buffers, Uint8Arrays) are stored exactly as given and never pass
 * through here: capture is byte-exact, and decoding happens only where text
 * is shown (docs/tools.md, "Bytes and text").
 */

/**
 * Incremental encoder for string input. A JavaScript string is UTF-16, so
 * the one thing that can be split between writes is a surrogate pair: a high
 * surrogate at the end of one write waits for its low half in the next. A
 * surrogate without its pair has no UTF-8 form and is encoded as U+FFFD, as
 * `Buffer.from(string)` does.
 */
export class StringCarry {
  private pending = '';

  /** True while a high surrogate waits for its pair. */
  get holding(): boolean {
    return this.pending.length > 0;
  }

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
