/**
 * The progress line `sluice batch` draws on stderr when it is a terminal:
 * done/total, rate, ETA, failures and bytes captured, redrawn in place at
 * most ten times a second and cleared before the command ends.
 */

import { formatBytes } from '../engine/protocol/units.js';

/** Counts the line shows. */
export interface ProgressCounts {
  done: number;
  /** Items in the input, when known (a file is counted first; stdin is not). */
  total: number | undefined;
  failed: number;
  bytes: number;
}

const WIDTH = 24;

function formatEta(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** The progress line for `c`, `elapsedMs` after the start. */
export function progressLine(c: ProgressCounts, elapsedMs: number): string {
  const rate = elapsedMs > 0 ? (c.done * 1000) / elapsedMs : 0;
  const parts: string[] = [];
  if (c.total !== undefined && c.total > 0) {
    const filled = Math.min(WIDTH, Math.round((c.done / c.total) * WIDTH));
    parts.push(`[${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${c.done}/${c.total}`);
  } else parts.push(`${c.done} done`);
  parts.push(`${rate.toFixed(1)}/s`);
  if (c.total !== undefined) parts.push(`ETA ${formatEta(rate > 0 ? (c.total - c.done) / rate : Number.NaN)}`);
  parts.push(`${c.failed} failed`);
  parts.push(formatBytes(c.bytes));
  return parts.join('  ');
}

/**
 * Columns a one-line status may fill on `out` without wrapping: one less
 * than the terminal reports, or 79 when it reports none or an implausible
 * width (a pty that was never sized says 0).
 */
export function lineWidth(out: { columns?: number | undefined }): number {
  return out.columns !== undefined && out.columns > 10 ? out.columns - 1 : 79;
}

/** Draws the line on a terminal stream. */
export class ProgressBar {
  private readonly started = Date.now();
  private last = 0;
  private drawn = false;

  constructor(private readonly out: NodeJS.WriteStream) {}

  /** Redraws, unless the last redraw was under 100 ms ago (`force` redraws anyway). */
  update(c: ProgressCounts, force = false): void {
    const now = Date.now();
    if (!force && now - this.last < 100) return;
    this.last = now;
    const width = lineWidth(this.out);
    this.out.write(`\r\x1b[2K${progressLine(c, now - this.started).slice(0, width)}`);
    this.drawn = true;
  }

  /** Leaves the final line in place (a newline after it). */
  finish(c: ProgressCounts): void {
    this.update(c, true);
    if (this.drawn) this.out.write('\n');
  }
}
