/**
 * The text form of a search page, as the model sees it, and its parse back
 * into lines (Engine.search reads the tool's page through it). One line per
 * result: `N:text` for a match, `N-text` for a context line, `N` the
 * zero-based line number (a `read` offset), with context `--` between groups
 * that are not adjacent (as grep prints them), then a bracketed summary line. Stored lines hold no `\n`, so a
 * result line is unambiguous whatever its text.
 */
import { SEARCH_LINE_WINDOW, type SearchLine, type SearchPage } from './search.js';

/** The marker after a shown line that was cut. */
function cutLineMarker(bytes: number): string {
  return ` … [cut: the line is ${bytes} bytes]`;
}

const CUT = / … \[cut: the line is (\d+) bytes\]$/;

/**
 * The text form of a page, as the model sees it: `N:text` for a match,
 * `N-text` for a context line (N zero-based), `--` between groups that are
 * not adjacent, then one summary line in brackets.
 */
export function formatSearchPage(page: SearchPage, uri: string, offset: number): string {
  const out: string[] = [];
  let prev = -2;
  for (const l of page.lines) {
    if (page.context > 0 && prev >= -1 && l.line !== prev + 1) out.push('--');
    out.push(`${l.line}${l.match ? ':' : '-'}${l.text}${l.cut !== undefined ? cutLineMarker(l.cut) : ''}`);
    prev = l.line;
  }
  const end = (page.nextOffset ?? page.totalLines) - 1;
  const span =
    page.totalLines === 0
      ? 'an empty artifact'
      : offset > end
        ? `no lines (offset ${offset} is past the end: ${page.totalLines} lines)`
        : `lines ${offset}-${end} of ${page.totalLines}`;
  const found = page.matches === 1 ? '1 match' : `${page.matches === 0 ? 'No' : page.matches} matches`;
  out.push(`[${found} in ${uri}, ${span} searched; line numbers are zero-based read offsets]`);
  if (page.longLines > 0) {
    out.push(
      `[${page.longLines} ${page.longLines === 1 ? 'line' : 'lines'} over ${SEARCH_LINE_WINDOW} bytes searched on their first ${SEARCH_LINE_WINDOW} bytes only]`,
    );
  }
  return `${out.join('\n')}\n`;
}

/** Characters that make a pattern read as a regular expression (a `.` only before a quantifier: `1.2` is literal text). */
const REGEX_LIKE = /[\^$\\|*+?()[\]{}]|\.[*+?]/;

/** Whether `pattern` holds regular-expression syntax (see {@link literalPatternNote}). */
export function readsAsRegex(pattern: string): boolean {
  return REGEX_LIKE.test(pattern);
}

/**
 * The note a page that found nothing ends with when its pattern was taken
 * literally but reads as a regular expression (`^9999`, `a|b`, `\d+`): the
 * search looked for those characters themselves, and `regex` would have
 * matched them as a pattern. Undefined otherwise.
 */
export function literalPatternNote(pattern: string, regex: boolean, matches: number): string | undefined {
  if (regex || matches > 0 || !readsAsRegex(pattern)) return undefined;
  return `[The pattern ${JSON.stringify(pattern)} was searched as literal text; it looks like a regular expression: search with regex=true to match it as one]`;
}

/** The lines of a page's text form (see {@link formatSearchPage}), back as {@link SearchLine}s. */
export function parseSearchText(text: string): SearchLine[] {
  const lines: SearchLine[] = [];
  for (const raw of text.split('\n')) {
    const m = /^(\d+)([:-])/.exec(raw);
    if (!m) continue;
    let body = raw.slice(m[0].length);
    const c = CUT.exec(body);
    const line: SearchLine = { line: Number(m[1]), text: body, match: m[2] === ':' };
    if (c) {
      body = body.slice(0, c.index);
      line.text = body;
      line.cut = Number(c[1]);
    }
    lines.push(line);
  }
  return lines;
}
