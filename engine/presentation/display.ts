/** UI display text, bounded in memory apart from the output: for people, never authoritative, never shown to the model. */
import { detachString, unitCutBefore, unitPrefix, utf8SuffixStart } from '../protocol/text.js';
import { formatBytes } from '../protocol/units.js';

const DEFAULT_LIVE_DISPLAY_BYTES = 64 * 1024;

/** The elision marker that starts a live display whose oldest text was dropped. */
export function elisionMarker(elidedBytes: number): string {
  return `[… ${elidedBytes} earlier bytes of display elided]\n`;
}

/** Room for the marker of any count up to 2^53, so that text plus marker stays within the bound. */
const MARKER_RESERVE = Buffer.byteLength(elisionMarker(Number.MAX_SAFE_INTEGER), 'utf8');
/** Smallest bound that leaves room for the marker and some text. */
export const MIN_LIVE_DISPLAY_BYTES = MARKER_RESERVE + 64;
/** Fraction of the bound kept after a trim. */
const LOW_WATER = 0.75;
/** A trim that ends mid-line also drops the rest of that line when it is shorter than this. */
const LINE_ALIGN_CHARS = 1024;
const MAX_PIECES = 64;

/**
 * The live display of one call, keeping the newest text within `maxBytes`
 * (an elision marker included): the oldest is dropped down to three quarters
 * of the bound, so that appends cost amortised O(appended). Reading `text`
 * is O(bound): a terminal writes appends as they come.
 */
export class LiveDisplay {
  /** The bound on {@link text}, in UTF-8 bytes. */
  readonly maxBytes: number;
  private pieces: string[] = [];
  private pieceBytes: number[] = [];
  private bytes = 0;
  private elided = 0;
  private cached: string | undefined = '';

  constructor(maxBytes: number = DEFAULT_LIVE_DISPLAY_BYTES) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < MIN_LIVE_DISPLAY_BYTES) {
      throw new RangeError(
        `live display bound must be an integer of at least ${MIN_LIVE_DISPLAY_BYTES}, got ${maxBytes}`,
      );
    }
    this.maxBytes = maxBytes;
  }

  append(text: string): void {
    if (text.length === 0) return;
    let size = Buffer.byteLength(text, 'utf8');
    if (size > this.maxBytes) {
      // Only the newest maxBytes can survive; never keep (or pin, via a slice) the rest.
      text = detachString(text.slice(utf8SuffixStart(text, this.maxBytes)));
      const kept = Buffer.byteLength(text, 'utf8');
      this.elided += size - kept;
      size = kept;
    }
    this.pieces.push(text);
    this.pieceBytes.push(size);
    this.bytes += size;
    this.cached = undefined;
    const limit = this.elided > 0 || this.bytes > this.maxBytes ? this.maxBytes - MARKER_RESERVE : this.maxBytes;
    // To a low-water mark: trimming copies the kept part of the oldest piece, O(bound) if done on every append.
    if (this.bytes > limit) this.dropOldest(this.bytes - Math.floor(limit * LOW_WATER));
    if (this.pieces.length > MAX_PIECES) this.coalesce();
  }

  /** The display so far: the elision marker (when text was dropped), then the newest text. */
  get text(): string {
    if (this.cached === undefined) {
      const body = this.pieces.join('');
      this.cached = this.elided > 0 ? elisionMarker(this.elided) + body : body;
    }
    return this.cached;
  }

  /** UTF-8 bytes of display text dropped from the start so far. */
  get elidedBytes(): number {
    return this.elided;
  }

  /** UTF-8 bytes of display text kept (without the marker). */
  get retainedBytes(): number {
    return this.bytes;
  }

  private dropOldest(excess: number): void {
    let endedLine = false;
    while (excess > 0 && this.pieces.length > 0) {
      const size = this.pieceBytes[0] as number;
      const piece = this.pieces[0] as string;
      if (size <= excess) {
        endedLine = piece.endsWith('\n');
        this.dropPiece();
        excess -= size;
        continue;
      }
      const start = utf8SuffixStart(piece, size - excess);
      endedLine = piece.charCodeAt(start - 1) === 0x0a;
      this.replaceFirst(piece.slice(start));
      excess = 0;
    }
    if (!endedLine) this.alignToLine();
  }

  /** After a trim that ended mid-line, drops the rest of that line when it is short. */
  private alignToLine(): void {
    const piece = this.pieces[0];
    if (piece === undefined) return;
    const nl = piece.indexOf('\n');
    if (nl === -1 || nl >= LINE_ALIGN_CHARS) return;
    if (nl === piece.length - 1) this.dropPiece();
    else this.replaceFirst(piece.slice(nl + 1));
  }

  private dropPiece(): void {
    const size = this.pieceBytes.shift() as number;
    this.pieces.shift();
    this.bytes -= size;
    this.elided += size;
  }

  /** Replaces the oldest piece with its suffix `kept`, copied so it does not pin the original. */
  private replaceFirst(kept: string): void {
    const size = this.pieceBytes[0] as number;
    const copy = detachString(kept);
    const keptBytes = Buffer.byteLength(copy, 'utf8');
    this.pieces[0] = copy;
    this.pieceBytes[0] = keptBytes;
    this.bytes -= size - keptBytes;
    this.elided += size - keptBytes;
  }

  private coalesce(): void {
    const joined = this.pieces.join('');
    this.pieces = [joined];
    this.pieceBytes = [this.bytes];
  }
}

/** Largest display event, in UTF-16 code units: bounded events keep a subscriber's queue bounded in bytes. */
export const MAX_DISPLAY_EVENT_CHARS = 8192;

/** Splits display text into events of at most {@link MAX_DISPLAY_EVENT_CHARS}, never inside a surrogate pair. */
export function displayFrames(text: string): string[] {
  if (text.length <= MAX_DISPLAY_EVENT_CHARS) return [text];
  const frames: string[] = [];
  let i = 0;
  while (i < text.length) {
    const end = unitCutBefore(text, Math.min(text.length, i + MAX_DISPLAY_EVENT_CHARS));
    frames.push(text.slice(i, end));
    i = end;
  }
  return frames;
}

/** Facts about a call that ended without success, for {@link incompleteDisplay}. */
export interface IncompleteCallInfo {
  tool: string;
  /** What the call was doing, in a few words (e.g. the command). */
  summary?: string;
  status: 'failed' | 'cancelled';
  durationMs: number;
  /** What the published output holds, per stream (`''` or `output` for single output): nothing when none was published. */
  streams: Array<{ name: string; bytes: number; lines: number }>;
  /** True when the tool wrote output but none of it could be kept (a disk error): the display must not claim any. */
  lost?: boolean;
  /** What each stream accepted, when only a prefix of it could be stored (a full disk). */
  accepted?: Array<{ name: string; bytes: number; lines: number }>;
  /** Why it ended (an error message, "cancelled by the user", ...). */
  reason: string;
}

const MAX_SUMMARY_CHARS = 200;
const MAX_REASON_CHARS = 2000;

/** Human duration: `850 ms`, `1.2 s`, `2 min 5 s`, `1 h 2 min`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return 'an unknown time';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** At most `max` UTF-16 units of `s`, never ending inside a surrogate pair, with `…` when shortened. */
function clip(s: string, max: number): string {
  return s.length <= max ? s : `${unitPrefix(s, max)}…`;
}

export { formatBytes };

function captured(s: { name: string; bytes: number; lines: number }): string {
  const name = s.name === '' ? 'output' : s.name;
  if (s.bytes === 0) return `${name} empty`;
  return `${name} ${formatBytes(s.bytes)} in ${plural(s.lines, 'line', 'lines')}`;
}

/** A stream's kept prefix, with what it accepted when that was more. */
function keptOf(s: { name: string; bytes: number; lines: number }, accepted: { bytes: number } | undefined): string {
  const kept = captured(s);
  return accepted !== undefined && accepted.bytes > s.bytes
    ? `${kept} of ${formatBytes(accepted.bytes)} accepted`
    : kept;
}

/** The display of a call that failed or was cancelled: what ran, how long, what was captured, why it ended (docs/presentation.md). */
export function incompleteDisplay(info: IncompleteCallInfo): string {
  const verb = info.status === 'cancelled' ? 'was cancelled' : 'failed';
  // One line: a multi-line command shows ↵ where its newlines were.
  const summary =
    info.summary === undefined ? '' : clip(info.summary.trim().replace(/\r?\n/g, ' ↵ '), MAX_SUMMARY_CHARS);
  const head = `${info.tool} ${verb} after ${formatDuration(info.durationMs)}${summary === '' ? '' : `: ${summary}`}`;
  const reasonText = clip(info.reason.trim(), MAX_REASON_CHARS) || 'no reason given';
  const reason = `Reason: ${reasonText.replace(/\r?\n/g, '\n  ')}`;
  const total = info.streams.reduce((n, s) => n + s.bytes, 0);
  const accepted = info.accepted;
  const what = info.lost
    ? 'Kept: nothing (the output could not be stored)'
    : accepted !== undefined
      ? `Kept (incomplete): ${info.streams.map((s, i) => keptOf(s, accepted[i])).join(', ')}; the rest could not be stored`
      : total === 0
        ? 'Captured: nothing'
        : `Captured (incomplete): ${info.streams.map(captured).join(', ')}`;
  return `${head}\n${reason}\n${what}`;
}
