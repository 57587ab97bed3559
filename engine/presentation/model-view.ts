/**
 * The model view of a call's output, built only from the previews; its
 * layout is a contract (docs/presentation.md). Preview limits are budgeted so
 * that the view never passes `maxModelBytes`: it is never cut, and its hints stay truthful.
 */
import { formatArtifactUri, isDigest } from '../../store/uri.js';
import { BadDeclarationError, BadUriError, ResourceLimitError } from '../protocol/errors.js';
import { MAX_STREAM_NAME_BYTES, MAX_STREAMS, type OutputDeclaration, streamNameProblem } from '../protocol/streams.js';
import { formatBytes } from './display.js';
import type { ToolOutputOptions } from './options.js';
import type { Preview } from './preview.js';

/** The size of a whole stream, as every read hint states it. */
export interface StreamTotals {
  /** Stored bytes of the whole stream. */
  bytes: number;
  /** Lines of the whole stream, by the line rule. */
  lines: number;
}

/** The tail of a head+tail preview: the stream's last whole lines, shown after the hint. */
export interface TailView {
  /** The shown last lines (decoded text). */
  text: string;
  /** Zero-based index of the tail's first line: a read offset. */
  startLine: number;
  /** Stored bytes from the head's offset to the tail: what the view leaves out. */
  omittedBytes: number;
}

/** One named stream of a streams view. */
export interface StreamView {
  name: string;
  /** Its preview (the head), built with the limits of {@link streamPreviewBudget}. */
  preview: Preview;
  /** The whole stream's size, stated in its hint. */
  total: StreamTotals;
  /** With a head+tail preview of a truncated stream: the tail. */
  tail?: TailView;
}

/** The output of one call as the model view needs it. */
export type OutputView =
  | { kind: 'single'; digest: string; preview: Preview; total: StreamTotals; tail?: TailView }
  | { kind: 'streams'; manifest: string; streams: StreamView[] };

/** The line that stands for a stream with no bytes at all. */
export const EMPTY_STREAM_MARKER = '(empty)';

/** Smallest per-stream byte limit the aggregate bound may impose: room for one code point of any size. */
export const MIN_STREAM_PREVIEW_BYTES = 4;

const HINT_OPEN = '[Truncated: ';
const HINT_READ = '. Read more: read(filePath="';
const HINT_MIDDLE = '", offset=';
const HINT_CLOSE = ')]';
const TAIL_OPEN = '[Tail: from offset=';
const TAIL_CLOSE = ' to the end]';
/** `artifact://` plus a 64-hex digest. */
const BARE_URI_BYTES = formatArtifactUri('0'.repeat(64)).length;

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** What the view shows of a stream, as the hint says it: `lines 1-2000 of 100000 shown, ...`. */
function shownText(preview: Preview, total: StreamTotals, tail: TailView | undefined): string {
  const k = preview.offset;
  const parts: string[] = [];
  if (k >= 1) parts.push(k === 1 ? '1' : `1-${k}`);
  if (tail) parts.push(tail.startLine + 1 === total.lines ? `${total.lines}` : `${tail.startLine + 1}-${total.lines}`);
  const word = parts.length === 1 && !parts[0]?.includes('-') ? 'line' : 'lines';
  const ranges = parts.length > 0 ? `${word} ${parts.join(' and ')}` : '0 lines';
  let text = `${ranges} of ${total.lines} shown`;
  const partial = preview.text.length - (preview.text.lastIndexOf('\n') + 1);
  if (partial > 0) {
    const cut = Buffer.byteLength(preview.text.slice(preview.text.length - partial), 'utf8');
    text += `, line ${k + 1} cut after ${plural(cut, 'byte', 'bytes')}`;
  }
  if (tail) {
    const span = tail.startLine - k === 1 ? `line ${k + 1}` : `lines ${k + 1}-${tail.startLine}`;
    text += `; ${span} (${formatBytes(tail.omittedBytes)}) omitted`;
  }
  return text;
}

/**
 * The read hint for a truncated preview (without a line ending), e.g.
 * `[Truncated: lines 1-2000 of 100000 shown (575.0 KiB total). Read more: read(filePath="<uri>", offset=2000)]`.
 */
export function readHint(uri: string, preview: Preview, total: StreamTotals, tail?: TailView): string {
  const size = `(${formatBytes(total.bytes)} total)`;
  return `${HINT_OPEN}${shownText(preview, total, tail)} ${size}${HINT_READ}${uri}${HINT_MIDDLE}${preview.offset}${HINT_CLOSE}`;
}

/** The line that opens a tail (without a line ending): `[Tail: from offset=<startLine> to the end]`. */
export function tailMarker(startLine: number): string {
  return `${TAIL_OPEN}${startLine}${TAIL_CLOSE}`;
}

/** The hint line, then the tail's marker and lines when there is a tail; every line ends with `\n`. */
function truncatedEnd(uri: string, preview: Preview, total: StreamTotals, tail: TailView | undefined): string {
  checkOffset(preview);
  const hint = `${readHint(uri, preview, total, tail)}\n`;
  if (!tail) return hint;
  checkTail(preview, total, tail);
  return `${hint}${tailMarker(tail.startLine)}\n${terminated(tail.text)}`;
}

function checkTail(preview: Preview, total: StreamTotals, tail: TailView): void {
  if (!Number.isSafeInteger(tail.startLine) || tail.startLine <= preview.offset || tail.startLine >= total.lines) {
    throw new RangeError(
      `tail start ${tail.startLine} must lie after the head's offset ${preview.offset} and before ${total.lines}`,
    );
  }
}

function checkDigest(digest: string, what: string): void {
  if (!isDigest(digest)) {
    throw new BadUriError(`${what} must be 64 lowercase hex characters, got ${JSON.stringify(String(digest))}`);
  }
}

function checkOffset(preview: Preview): void {
  if (!Number.isSafeInteger(preview.offset) || preview.offset < 0) {
    throw new RangeError(`preview offset must be a non-negative integer, got ${preview.offset}`);
  }
}

/** `text` with its last line terminated: a `\n` is added unless it is empty or already ends with one. */
function terminated(text: string): string {
  return text === '' || text.endsWith('\n') ? text : `${text}\n`;
}

function renderBlock(manifest: string, s: StreamView): string {
  const { preview } = s;
  const heading = `[${s.name}]\n`;
  if (!preview.truncated) {
    return preview.text === '' ? `${heading}${EMPTY_STREAM_MARKER}\n` : heading + terminated(preview.text);
  }
  const end = truncatedEnd(formatArtifactUri(manifest, s.name), preview, s.total, s.tail);
  return `${heading}${terminated(preview.text)}${end}`;
}

/** Renders the model view of one call (EBADURI, EBADDECL); the aggregate bound is {@link renderBoundedModelView}'s. */
export function renderModelView(view: OutputView): string {
  if (view.kind === 'single') {
    checkDigest(view.digest, 'output digest');
    const { preview } = view;
    if (!preview.truncated) return preview.text;
    return `${terminated(preview.text)}${truncatedEnd(formatArtifactUri(view.digest), preview, view.total, view.tail)}`;
  }
  checkDigest(view.manifest, 'manifest digest');
  if (view.streams.length === 0) throw new BadDeclarationError('a streams view needs at least one stream');
  const seen = new Set<string>();
  for (const s of view.streams) {
    const problem = streamNameProblem(s.name);
    if (problem) throw new BadDeclarationError(problem, { stream: String(s.name) });
    if (seen.has(s.name)) {
      throw new BadDeclarationError(`stream ${JSON.stringify(s.name)} appears twice`, { stream: s.name });
    }
    seen.add(s.name);
  }
  return view.streams.map((s) => renderBlock(view.manifest, s)).join('\n');
}

/** The widest number any hint can hold (a stream is at most 2^53 bytes and lines). */
const WIDEST = Number.MAX_SAFE_INTEGER;

/** Largest hint block for a URI of `uriBytes`, every number at its widest, tail marker included, so one budget serves both modes. */
function maxHintLineBytes(uriBytes: number): number {
  const widest: Preview = { text: 'x', bytes: 1, lines: 1, truncated: true, offset: WIDEST };
  const total = { bytes: WIDEST, lines: WIDEST };
  const tail: TailView = { text: '', startLine: WIDEST, omittedBytes: WIDEST };
  const hint = readHint('u'.repeat(uriBytes), widest, total, tail);
  // The 1-byte cut line stands for the widest: 15 more digits and the `s` of `bytes`.
  const cutWidth = String(WIDEST).length - 1 + 1;
  return hint.length + 1 + cutWidth + tailMarker(WIDEST).length + 1 + 1;
}

/** Largest number of bytes a single-output view adds to its preview. */
export function singleViewOverhead(_maxLines: number): number {
  return 1 + maxHintLineBytes(BARE_URI_BYTES);
}

/** Largest number of bytes a streams view of `streamCount` streams adds to its previews, for any valid names. */
export function streamsViewOverhead(streamCount: number, _maxLines: number): number {
  const heading = 1 + MAX_STREAM_NAME_BYTES + 1 + 1;
  const hint = maxHintLineBytes(BARE_URI_BYTES + 1 + MAX_STREAM_NAME_BYTES);
  const tail = Math.max(EMPTY_STREAM_MARKER.length + 1, 1 + hint);
  return streamCount * (heading + tail) + (streamCount - 1);
}

/** Smallest aggregate bound that fits `streamCount` streams with {@link MIN_STREAM_PREVIEW_BYTES} each. */
export function minModelViewBytes(streamCount: number, maxLines: number): number {
  return streamsViewOverhead(streamCount, maxLines) + streamCount * MIN_STREAM_PREVIEW_BYTES;
}

/** The per-stream preview limits under the aggregate bound. */
export interface PreviewLimits {
  maxLines: number;
  maxBytes: number;
}

type BudgetOptions = Pick<ToolOutputOptions, 'maxLines' | 'maxBytes' | 'maxModelBytes'>;

function checkCount(streamCount: number): void {
  if (!Number.isSafeInteger(streamCount) || streamCount < 1 || streamCount > MAX_STREAMS) {
    throw new BadDeclarationError(`a streams output has 1 to ${MAX_STREAMS} streams, got ${streamCount}`, {
      count: streamCount,
    });
  }
}

/**
 * The limits each of `streamCount` named streams' previews must be built
 * with so the view never passes `opts.maxModelBytes`: an equal share of what
 * the view's own lines leave. ResourceLimitError below {@link MIN_STREAM_PREVIEW_BYTES}.
 */
export function streamPreviewBudget(streamCount: number, opts: BudgetOptions): PreviewLimits {
  checkCount(streamCount);
  const room = opts.maxModelBytes - streamsViewOverhead(streamCount, opts.maxLines);
  const share = Math.floor(room / streamCount);
  if (share < MIN_STREAM_PREVIEW_BYTES) {
    throw new ResourceLimitError(
      `the model view bound of ${opts.maxModelBytes} bytes cannot fit ${streamCount} streams: at least ${minModelViewBytes(streamCount, opts.maxLines)} bytes are needed`,
      { maxModelBytes: opts.maxModelBytes, streams: streamCount },
    );
  }
  return { maxLines: opts.maxLines, maxBytes: Math.min(opts.maxBytes, share) };
}

/** Like {@link streamPreviewBudget}, for a single output (no heading, shorter hint). */
export function singlePreviewBudget(opts: BudgetOptions): PreviewLimits {
  const share = opts.maxModelBytes - singleViewOverhead(opts.maxLines);
  if (share < MIN_STREAM_PREVIEW_BYTES) {
    throw new ResourceLimitError(`the model view bound of ${opts.maxModelBytes} bytes cannot fit one output preview`, {
      maxModelBytes: opts.maxModelBytes,
    });
  }
  return { maxLines: opts.maxLines, maxBytes: Math.min(opts.maxBytes, share) };
}

/** The preview limits for every stream of `decl` (the same for each stream). */
export function previewBudget(decl: OutputDeclaration, opts: BudgetOptions): PreviewLimits {
  return decl.kind === 'single' ? singlePreviewBudget(opts) : streamPreviewBudget(decl.streams.length, opts);
}

/** Checks a rendered view against the aggregate bound and returns its UTF-8 size; ResourceLimitError when larger (a view is never cut). */
export function assertModelViewWithinBound(rendered: string, maxModelBytes: number): number {
  const bytes = Buffer.byteLength(rendered, 'utf8');
  if (bytes > maxModelBytes) {
    throw new ResourceLimitError(`the model view is ${bytes} bytes, over its bound of ${maxModelBytes} bytes`, {
      bytes,
      maxModelBytes,
    });
  }
  return bytes;
}

/** {@link renderModelView} followed by {@link assertModelViewWithinBound}. */
export function renderBoundedModelView(view: OutputView, maxModelBytes: number): string {
  const rendered = renderModelView(view);
  assertModelViewWithinBound(rendered, maxModelBytes);
  return rendered;
}
