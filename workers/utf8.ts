/** Strings a tool writes, encoded as UTF-8; bytes never pass through here (docs/tools.md, "Bytes and text"). */

/**
 * Incremental string encoder: a high surrogate ending one write waits for
 * its low half; a lone surrogate becomes U+FFFD, as `Buffer.from` does.
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
