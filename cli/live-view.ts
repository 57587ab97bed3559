/**
 * The live view of `sluice run` on a terminal: an in-place status area on
 * stderr that the final display replaces at the end (docs/cli.md).
 *
 *     ⠹ bash · 12.4 s · stdout 47.0 KiB in 912 lines · stderr 89 bytes in 2 lines
 *       │ test 911 passed
 *
 * The first line ticks even while the tool is silent. Below it, the last
 * complete lines of the live display, each clipped to one row, which is what
 * lets the area be erased and redrawn exactly. Own code rather than
 * log-update: two escape sequences do not justify its packages in every
 * embedder's install. Memory: {@link LIVE_LINES} clipped lines and one
 * partial line of at most {@link PARTIAL_LINE_BYTES}.
 */
import { formatBytes, formatDuration } from '../engine/presentation/display.js';
import { sanitizeForTerminal } from '../engine/presentation/sanitize.js';
import { lineWidth } from './progress.js';

/** Complete display lines kept under the status line. */
export const LIVE_LINES = 4;
/** A partial display line longer than this is dropped until its newline (it could never be shown whole). */
export const PARTIAL_LINE_BYTES = 16 * 1024;
/** How often the area is redrawn (the spinner and the clock tick). */
export const REDRAW_MS = 100;

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const ESC = '\x1b[';

/** What the view writes to: a terminal stream (stderr). */
export interface LiveTerminal {
  write(text: string): unknown;
  readonly columns?: number;
}

/** Counts of one stream, as the progress event gives them. */
export interface LiveStream {
  name: string;
  bytes: number;
  lines: number;
}

/** Terminal columns of code point `c`: 2 for East Asian wide and fullwidth characters and emoji, else 1. */
function columnsOf(c: number): number {
  return (c >= 0x1100 && c <= 0x115f) ||
    (c >= 0x2e80 && c <= 0xa4cf) ||
    (c >= 0xac00 && c <= 0xd7a3) ||
    (c >= 0xf900 && c <= 0xfaff) ||
    (c >= 0xfe30 && c <= 0xfe4f) ||
    (c >= 0xff00 && c <= 0xff60) ||
    (c >= 0xffe0 && c <= 0xffe6) ||
    (c >= 0x1f300 && c <= 0x1faff) ||
    (c >= 0x20000 && c <= 0x3fffd)
    ? 2
    : 1;
}

/**
 * `text` clipped to `width` terminal columns, `…` marking a cut. Wide
 * characters count two, so a drawn line never wraps: the redraw moves up
 * exactly as many rows as it drew.
 */
export function clip(text: string, width: number): string {
  let cols = 0;
  let i = 0;
  const cps = [...text];
  for (; i < cps.length; i++) {
    const w = columnsOf((cps[i] as string).codePointAt(0) as number);
    if (cols + w > width) break;
    cols += w;
  }
  if (i === cps.length) return text;
  // Room for the ellipsis: drop characters until one column is free.
  let kept = i;
  while (kept > 0 && cols + 1 > width) {
    kept--;
    cols -= columnsOf((cps[kept] as string).codePointAt(0) as number);
  }
  return `${cps.slice(0, kept).join('')}…`;
}

/** The in-place status area. */
export class LiveView {
  private readonly out: LiveTerminal;
  private readonly tool: string;
  private readonly startedAt: number;
  private readonly now: () => number;
  private readonly recent: string[] = [];
  private partial = '';
  private skipping = false;
  private streams: LiveStream[] = [];
  private drawn = 0;
  private frame = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(out: LiveTerminal, tool: string, options: { now?: () => number; startedAt?: number } = {}) {
    this.out = out;
    this.tool = tool;
    this.now = options.now ?? Date.now;
    this.startedAt = options.startedAt ?? this.now();
  }

  /** Starts redrawing every {@link REDRAW_MS} (the clock ticks even when nothing arrives). */
  start(): void {
    this.draw();
    this.timer = setInterval(() => this.draw(), REDRAW_MS);
  }

  /** A live display delta: its complete lines join the area, the rest waits for its newline. */
  display(text: string): void {
    let rest = text;
    for (let nl = rest.indexOf('\n'); nl !== -1; nl = rest.indexOf('\n')) {
      const line = this.skipping ? undefined : this.partial + rest.slice(0, nl);
      this.partial = '';
      this.skipping = false;
      rest = rest.slice(nl + 1);
      if (line === undefined) continue;
      this.recent.push(clip(sanitizeForTerminal(line.replace(/\r$/, '')), 1024));
      if (this.recent.length > LIVE_LINES) this.recent.shift();
    }
    if (this.skipping) return;
    this.partial += rest;
    if (this.partial.length > PARTIAL_LINE_BYTES) {
      // Too long to ever show whole: keep nothing of it until it ends.
      this.partial = '';
      this.skipping = true;
    }
  }

  /** A progress event's counts. */
  progress(streams: LiveStream[]): void {
    this.streams = streams.map((s) => ({ ...s }));
  }

  /** The area's lines as they are drawn now (without escapes), for a width of `columns`. */
  lines(columns = this.out.columns): string[] {
    const width = lineWidth({ columns });
    const elapsed = formatDuration(this.now() - this.startedAt);
    const counts = this.streams.map(
      (s) =>
        `${s.name === '' ? 'output' : s.name} ${s.bytes === 0 ? 'empty' : `${formatBytes(s.bytes)} in ${s.lines} ${s.lines === 1 ? 'line' : 'lines'}`}`,
    );
    const head = [`${SPINNER[this.frame % SPINNER.length]} ${this.tool}`, elapsed, ...counts].join(' · ');
    return [clip(sanitizeForTerminal(head), width), ...this.recent.map((l) => clip(`  │ ${l}`, width))];
  }

  private draw(): void {
    if (this.closed) return;
    this.frame++;
    const lines = this.lines();
    this.out.write(`${this.erase()}${lines.join('\n')}\n`);
    this.drawn = lines.length;
  }

  /** Moves up over the drawn area and erases it to the end of the screen. */
  private erase(): string {
    return this.drawn === 0 ? '' : `${ESC}${this.drawn}A\r${ESC}J`;
  }

  /** Stops the clock and replaces the area with `final` (the call's final display, already sanitised). */
  finish(final: string): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.out.write(`${this.erase()}${final}${final.endsWith('\n') ? '' : '\n'}`);
    this.drawn = 0;
  }

  /** Stops the clock and leaves the area as drawn (for an exit that has no final display). */
  stop(): void {
    this.closed = true;
    clearInterval(this.timer);
  }
}
