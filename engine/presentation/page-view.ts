/**
 * The model view of a self-paginating tool's page (the built-in `read`): the
 * page exactly as the tool returned it, then, when the tool's metadata says
 * more lines follow, one continuation line on a line of its own:
 *
 *     [More: read(filePath="<filePath>", offset=<nextOffset>)]
 *
 * Generic: any self-paginating tool whose metadata has a numeric `nextOffset`
 * and a string `filePath` (or `uri`) gets it. The line is never counted in
 * the page (`output.bytes` is the page alone), so the page can be recovered
 * from the view by its byte length, and it is never truncated.
 */

const MORE_OPEN = '[More: read(filePath=';
const MORE_MIDDLE = ', offset=';
const MORE_CLOSE = ')]';

/**
 * The continuation line (without a line ending) for a page's metadata, or
 * undefined when nothing follows. The path is quoted as a JSON string, so a
 * path with quotes or backslashes stays one unambiguous argument.
 */
export function continuationLine(metadata: Record<string, unknown> | undefined): string | undefined {
  const next = metadata?.nextOffset;
  if (typeof next !== 'number' || !Number.isSafeInteger(next) || next < 0) return undefined;
  const path =
    typeof metadata?.filePath === 'string'
      ? metadata.filePath
      : typeof metadata?.uri === 'string'
        ? metadata.uri
        : undefined;
  if (path === undefined) return undefined;
  return `${MORE_OPEN}${JSON.stringify(path)}${MORE_MIDDLE}${next}${MORE_CLOSE}`;
}

/**
 * The model view of a page: `page`, then the continuation line when there is
 * one (a `\n` is inserted first when the page is non-empty and does not end
 * with one; the line ends with `\n`), like the single-output read hint.
 */
export function renderPageView(page: string, metadata: Record<string, unknown> | undefined): string {
  const more = continuationLine(metadata);
  if (more === undefined) return page;
  const sep = page === '' || page.endsWith('\n') ? '' : '\n';
  return `${page}${sep}${more}\n`;
}
