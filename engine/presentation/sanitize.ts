/**
 * Terminal safety: tool text is made inert before it reaches a terminal
 * (docs/presentation.md). Neutralising the introducer (ESC or a C1 control)
 * makes a sequence inert; `escapes: 'strip'` removes complete sequences first.
 */

/** How escape sequences are treated. */
export interface SanitizeOptions {
  /** `'show'` renders every introducer visibly (`␛[31m`); `'strip'` removes complete sequences and shows incomplete ones. @default 'show' */
  escapes?: 'show' | 'strip';
}

// CSI: introducer, parameter bytes, intermediate bytes, final byte.
const CSI = '(?:\\x1b\\[|\\x9b)[\\x30-\\x3f]*[\\x20-\\x2f]*[\\x40-\\x7e]';
// OSC: ended by BEL or ST; its body excludes the introducers so a scan stops at the next one (linear time).
const OSC = '(?:\\x1b\\]|\\x9d)[^\\x07\\x1b\\x9c]*(?:\\x07|\\x1b\\\\|\\x9c)';
// DCS, SOS, PM, APC: ended by ST.
const STRING_SEQ = '(?:\\x1b[PX^_]|[\\x90\\x98\\x9e\\x9f])[^\\x1b\\x9c]*(?:\\x1b\\\\|\\x9c)';
// Any other escape: ESC, intermediates, one final byte; not the introducers of the longer forms
// above ([ ] P X ^ _), so an unterminated string sequence is shown rather than half removed.
const SHORT_ESC = '\\x1b[\\x20-\\x2f]*[\\x30-\\x4f\\x51-\\x57\\x59\\x5a\\x5c\\x60-\\x7e]';
const SEQUENCE = new RegExp(`${CSI}|${OSC}|${STRING_SEQ}|${SHORT_ESC}`, 'g');

// Controls other than \t and \n, a \r not followed by \n, C1, bidi controls, lone surrogates.
const UNSAFE =
  /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

// The same class without the global flag: test() on it keeps no state between calls.
const UNSAFE_ONE = new RegExp(UNSAFE.source);

function visible(ch: string): string {
  const c = ch.charCodeAt(0);
  if (c < 0x20) return String.fromCharCode(0x2400 + c);
  if (c === 0x7f) return '\u2421';
  if (c >= 0xd800 && c <= 0xdfff) return '\ufffd';
  return `<U+${c.toString(16).toUpperCase().padStart(4, '0')}>`;
}

/** `text` made safe to write to a terminal. */
export function sanitizeForTerminal(text: string, options: SanitizeOptions = {}): string {
  const stripped = options.escapes === 'strip' ? text.replace(SEQUENCE, '') : text;
  return stripped.replace(UNSAFE, visible);
}

/** True when `text` would pass through {@link sanitizeForTerminal} unchanged. */
export function isTerminalSafe(text: string): boolean {
  return !UNSAFE_ONE.test(text);
}
