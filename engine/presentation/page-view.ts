/**
 * The model view of a self-paginating tool's page: the page as returned,
 * then a `[More: …]` continuation or a past-the-end note (docs/read.md),
 * never counted in `output.bytes` nor truncated.
 */

const MORE_OPEN = '[More: read(filePath=';
const MORE_MIDDLE = ', offset=';
const MORE_BYTES = ', byteOffset=';
const MORE_CLOSE = ')]';
/** Said after a page whose stored bytes are not valid UTF-8: what the model reads is not all of what is stored. */
export const LOSSY_NOTE = '[Lossy: bytes that are not valid UTF-8 are shown as U+FFFD]';

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** The note for a read that started past the end (without a line ending), or undefined: an empty page is otherwise indistinguishable from an empty range asked for on purpose. */
export function pastEndNote(metadata: Record<string, unknown> | undefined): string | undefined {
  const offset = metadata?.offset;
  const total = metadata?.totalLines;
  // A search page says it in its own summary line.
  if (metadata?.kind === 'search') return undefined;
  if (!isCount(offset) || !isCount(total) || offset === 0 || offset < total) return undefined;
  const unit = metadata?.kind === 'directory' ? ['entry', 'entries'] : ['line', 'lines'];
  return `[offset ${offset} is past the end: ${total} ${total === 1 ? unit[0] : unit[1]}]`;
}

/** The continuation line (without a line ending), or undefined when nothing follows; the path is quoted as JSON, so it stays one unambiguous argument. */
export function continuationLine(metadata: Record<string, unknown> | undefined): string | undefined {
  // A tool that continues with a call of its own (grep) gives it whole.
  if (typeof metadata?.continuation === 'string') return `[More: ${metadata.continuation}]`;
  const next = metadata?.nextOffset;
  if (!isCount(next)) return undefined;
  const path =
    typeof metadata?.filePath === 'string'
      ? metadata.filePath
      : typeof metadata?.uri === 'string'
        ? metadata.uri
        : undefined;
  if (path === undefined) return undefined;
  const bytes = metadata?.nextByteOffset;
  const within = isCount(bytes) && bytes > 0 ? `${MORE_BYTES}${bytes}` : '';
  return `${MORE_OPEN}${JSON.stringify(path)}${MORE_MIDDLE}${next}${within}${MORE_CLOSE}`;
}

/** The model view of a page: `page`, then the lossy note, then the continuation line, each on a line of its own. */
export function renderPageView(page: string, metadata: Record<string, unknown> | undefined): string {
  const notes: string[] = [];
  const past = pastEndNote(metadata);
  if (past !== undefined) notes.push(past);
  if (metadata?.lossy === true) notes.push(LOSSY_NOTE);
  const more = continuationLine(metadata);
  if (more !== undefined) notes.push(more);
  if (notes.length === 0) return page;
  const sep = page === '' || page.endsWith('\n') ? '' : '\n';
  return `${page}${sep}${notes.join('\n')}\n`;
}
