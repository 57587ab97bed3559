/**
 * The model view: what the model receives for a tool call's output. It is
 * built only from the authoritative previews (never from display text), and
 * its layout is a contract (docs/presentation.md):
 *
 * - Single output: the preview text exactly. When truncated, a read hint line
 *   follows on a line of its own: a `\n` is inserted first when the preview is
 *   non-empty and does not end with one, and the hint line ends with `\n`.
 * - Named streams, in declaration order, one block each, blocks separated by
 *   exactly one empty line. A block is the heading line `[name]`, then the
 *   preview with its last line terminated (a `\n` is added when the preview
 *   does not end with one), then, only when that stream was truncated, its
 *   read hint line. An empty stream's block is its heading and the line
 *   `(empty)`. Every line of a streams view ends with `\n`.
 *
 * The aggregate bound: {@link streamPreviewBudget} lowers each stream's byte
 * limit so the rendered view cannot exceed `maxModelBytes` whatever the
 * content; previews built with those limits carry truthful offsets, so the
 * hints stay truthful. {@link assertModelViewWithinBound} checks the result
 * and raises ERESOURCELIMIT instead of ever cutting it.
 */
import { formatArtifactUri, isDigest } from '../../store/uri.js';
import { BadDeclarationError, BadUriError, ResourceLimitError } from '../protocol/errors.js';
import { MAX_STREAM_NAME_BYTES, MAX_STREAMS, type OutputDeclaration, streamNameProblem } from '../protocol/streams.js';
import type { ToolOutputOptions } from './options.js';
import type { Preview } from './preview.js';

/** One named stream of a streams view. */
export interface StreamView {
  /** The declared stream name. */
  name: string;
  /** Its preview, built with the limits of {@link streamPreviewBudget}. */
  preview: Preview;
}

/** The output of one call as the model view needs it. */
export type OutputView =
  | { kind: 'single'; digest: string; preview: Preview }
  | { kind: 'streams'; manifest: string; streams: StreamView[] };

/** The line that stands for a stream with no bytes at all. */
export const EMPTY_STREAM_MARKER = '(empty)';

/** Smallest per-stream byte limit the aggregate bound may impose: room for one code point of any size. */
export const MIN_STREAM_PREVIEW_BYTES = 4;

const HINT_OPEN = '[Truncated. Read more: read(filePath="';
const HINT_MIDDLE = '", offset=';
const HINT_CLOSE = ')]';
/** `artifact://` plus a 64-hex digest. */
const BARE_URI_BYTES = formatArtifactUri('0'.repeat(64)).length;

/**
 * The read hint for a truncated preview (without a line ending):
 * `[Truncated. Read more: read(filePath="<uri>", offset=<offset>)]`.
 */
export function readHint(uri: string, offset: number): string {
  return `${HINT_OPEN}${uri}${HINT_MIDDLE}${offset}${HINT_CLOSE}`;
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
  checkOffset(preview);
  return `${heading}${terminated(preview.text)}${readHint(formatArtifactUri(manifest, s.name), preview.offset)}\n`;
}

/**
 * Renders the model view of one call, exactly as described in the module
 * comment. Throws {@link BadUriError} for a digest that is not 64 lowercase
 * hex, {@link BadDeclarationError} for invalid, duplicate or missing stream
 * names. It does not check the aggregate bound: see
 * {@link renderBoundedModelView}.
 */
export function renderModelView(view: OutputView): string {
  if (view.kind === 'single') {
    checkDigest(view.digest, 'output digest');
    const { preview } = view;
    if (!preview.truncated) return preview.text;
    checkOffset(preview);
    return `${terminated(preview.text)}${readHint(formatArtifactUri(view.digest), preview.offset)}\n`;
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

function digits(n: number): number {
  return String(Math.max(0, Math.floor(n))).length;
}

/** Largest hint line, with its `\n`, for a URI of `uriBytes` and offsets up to `maxLines`. */
function maxHintLineBytes(uriBytes: number, maxLines: number): number {
  return HINT_OPEN.length + uriBytes + HINT_MIDDLE.length + digits(maxLines) + HINT_CLOSE.length + 1;
}

/**
 * Largest number of bytes a single-output view adds to its preview: an
 * inserted `\n` and the hint line.
 */
export function singleViewOverhead(maxLines: number): number {
  return 1 + maxHintLineBytes(BARE_URI_BYTES, maxLines);
}

/**
 * Largest number of bytes a streams view of `streamCount` streams adds to its
 * previews, for any valid names (at most 64 bytes) and offsets up to
 * `maxLines`: per block the heading line, then either the empty marker line
 * or an inserted `\n` plus the hint line; one separator between blocks.
 */
export function streamsViewOverhead(streamCount: number, maxLines: number): number {
  const heading = 1 + MAX_STREAM_NAME_BYTES + 1 + 1;
  const hint = maxHintLineBytes(BARE_URI_BYTES + 1 + MAX_STREAM_NAME_BYTES, maxLines);
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
 * The limits each of `streamCount` named streams' previews must be built with
 * so that the rendered view can never exceed `opts.maxModelBytes`, whatever
 * the content, names (up to 64 bytes) and offsets: `maxLines` as configured,
 * `maxBytes` = min(`opts.maxBytes`, an equal share of what the bound leaves
 * after {@link streamsViewOverhead}). Lines cost bytes too, so the line limit
 * needs no share. Throws {@link ResourceLimitError} when a share would be
 * below {@link MIN_STREAM_PREVIEW_BYTES}. A single output may use 1 here (a
 * stream block's overhead covers a single view's) or
 * {@link singlePreviewBudget} for its exact share.
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

/**
 * Checks a rendered view against the aggregate bound; returns its UTF-8 size.
 * Throws {@link ResourceLimitError} when it is larger: a view is never cut
 * silently.
 */
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
