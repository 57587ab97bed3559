import { describe, expect, it } from 'vitest';
import { isTerminalSafe, sanitizeForTerminal } from '../../engine/presentation/sanitize.js';

describe('terminal sanitising', () => {
  it('passes ordinary text, newlines, tabs and CRLF through', () => {
    const text = 'name\tsize\r\nfile.txt\t12 KB\n😀 é €\n';
    expect(sanitizeForTerminal(text)).toBe(text);
    expect(isTerminalSafe(text)).toBe(true);
  });

  it('shows the ESC of a colour sequence, so the sequence is inert text', () => {
    expect(sanitizeForTerminal('\x1b[31mred\x1b[0m')).toBe('␛[31mred␛[0m');
  });

  it('shows the ESC and BEL of an OSC title sequence', () => {
    expect(sanitizeForTerminal('\x1b]0;pwned\x07after')).toBe('␛]0;pwned␇after');
    expect(sanitizeForTerminal('\x1b]52;c;Y2xpcGJvYXJk\x1b\\')).toBe('␛]52;c;Y2xpcGJvYXJk␛\\');
  });

  it('shows BEL, backspace, NUL, form feed, vertical tab and DEL', () => {
    expect(sanitizeForTerminal('ding\x07 abc\x08\x08x \x00 \x0c \x0b \x7f')).toBe('ding␇ abc␈␈x ␀ ␌ ␋ ␡');
  });

  it('shows a lone carriage return, which could overwrite a line', () => {
    expect(sanitizeForTerminal('safe\rEVIL')).toBe('safe␍EVIL');
    expect(sanitizeForTerminal('end\r')).toBe('end␍');
    expect(sanitizeForTerminal('a\r\r\nb')).toBe('a␍\r\nb');
  });

  it('shows C1 controls such as the one-character CSI U+009B', () => {
    expect(sanitizeForTerminal('\u009b31mred')).toBe('<U+009B>31mred');
    expect(sanitizeForTerminal('\u0085\u009d0;t\u009c')).toBe('<U+0085><U+009D>0;t<U+009C>');
  });

  it('shows bidirectional override and isolate controls', () => {
    expect(sanitizeForTerminal('a\u202eb\u2066c\u2069')).toBe('a<U+202E>b<U+2066>c<U+2069>');
  });

  it('replaces lone surrogates and keeps pairs', () => {
    expect(sanitizeForTerminal('x\ud800y\udc00z😀')).toBe('x\ufffdy\ufffdz😀');
  });

  it('in strip mode removes complete sequences and shows what is left', () => {
    const strip = (s: string) => sanitizeForTerminal(s, { escapes: 'strip' });
    expect(strip('\x1b[1;31mred\x1b[0m plain')).toBe('red plain');
    expect(strip('\x1b]0;title\x07text')).toBe('text');
    expect(strip('\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\')).toBe('link');
    expect(strip('\x1bPq#0;2;0;0;0\x1b\\after')).toBe('after');
    expect(strip('\x1b7saved\x1b8')).toBe('saved');
    expect(strip('\u009b2Jcleared')).toBe('cleared');
    // An unterminated OSC is not a complete sequence: it stays visible.
    expect(strip('\x1b]0;no end')).toBe('␛]0;no end');
    expect(strip('bell\x07')).toBe('bell␇');
  });

  it('leaves no raw control character behind, whatever the input', () => {
    let all = '';
    for (let c = 0; c < 0xa0; c++) all += String.fromCharCode(c);
    for (const mode of ['show', 'strip'] as const) {
      const out = sanitizeForTerminal(all + all, { escapes: mode });
      expect(isTerminalSafe(out)).toBe(true);
      expect(out.replace(/[\n\t]|\r\n/g, '')).not.toMatch(/[\x00-\x1f\x7f-\x9f]/);
    }
  });

  it('runs in linear time on many unterminated sequences', () => {
    const input = '\x1b]'.repeat(200_000);
    const start = performance.now();
    sanitizeForTerminal(input, { escapes: 'strip' });
    expect(performance.now() - start).toBeLessThan(2000);
  });
});
