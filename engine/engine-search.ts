/** `Engine.search()`: the built-in `grep` tool on the ordinary call path, as a model's call runs, its page turned back into lines. */

import type { SearchLine } from '../store/search.js';
import { parseSearchText } from '../store/search-text.js';
import type { CallOptions } from './call/call-types.js';
import { deserializeError, ProtocolError, ToolFailedError } from './protocol/errors.js';
import type { TerminalResult } from './result.js';

/** The registry name of the built-in search tool. */
export const SEARCH_TOOL = 'grep';

/** Options of `Engine.search`: what to match and which page, plus the ordinary call options. */
export interface SearchOptions extends Omit<CallOptions, 'callId' | 'preview'> {
  /** Treat the pattern as a regular expression: RE2 syntax, matched within one line in linear time. @default false */
  regex?: boolean;
  /** Ignore letter case. @default false */
  ignoreCase?: boolean;
  /** Lines of context before and after each match, 0 to 10. @default 0 */
  context?: number;
  /** Most matches in the page, 1 to 1000. @default 100 */
  limit?: number;
  /** Zero-based line to start at (a page's `nextOffset`). @default 0 */
  offset?: number;
}

export type { SearchLine } from '../store/search.js';

/** One page of search results, as `Engine.search`, `sluice grep --json` and `GET /v1/search` return it. */
export interface SearchResult {
  /** The page as the model sees it: `N:text` matches, `N-text` context, `--` gaps, a summary line. */
  content: string;
  /** The matching and context lines, N zero-based (a `read` offset). */
  lines: SearchLine[];
  /** Matching lines in the page. */
  matches: number;
  /** Zero-based line the search started at, as requested. */
  offset: number;
  /** Lines in the whole artifact or stream. */
  totalLines: number;
  /** Where the next page starts, or null when the search reached the end. */
  nextOffset: number | null;
  /** Lines over 1 MiB that were searched on their first 1 MiB only. */
  longLines: number;
}

/** The `grep` tool's arguments (absent options left out, so the tool's defaults apply). */
export function searchArgs(filePath: string, pattern: string, options: SearchOptions = {}): Record<string, unknown> {
  const args: Record<string, unknown> = { filePath, pattern };
  for (const key of ['regex', 'ignoreCase', 'context', 'limit', 'offset'] as const) {
    if (options[key] !== undefined) args[key] = options[key];
  }
  return args;
}

/** The call options in `options` (everything but the search's own). */
export function searchCallOptions(options: SearchOptions = {}): CallOptions {
  const { regex: _r, ignoreCase: _i, context: _c, limit: _l, offset: _o, ...call } = options;
  return call;
}

function count(m: Record<string, unknown>, key: string): number {
  const v = m[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new ProtocolError(`the grep tool's metadata has no valid ${key} (got ${JSON.stringify(v)})`);
  }
  return v;
}

/** The page of a finished `grep` call; a failed call throws its typed error (EBADURI, ENOTFOUND, EBADARGS, ...). */
export function searchResultOf(result: TerminalResult): SearchResult {
  if (result.status !== 'success') {
    throw result.error
      ? deserializeError(result.error)
      : new ToolFailedError(`grep ${result.status} without an error`, { status: result.status });
  }
  if (result.output?.kind !== 'page') {
    throw new ProtocolError(`${result.tool} is not a self-paginating search (output ${result.output?.kind ?? 'none'})`);
  }
  const content = Buffer.from(result.model, 'utf8').subarray(0, result.output.bytes).toString('utf8');
  const m = result.metadata;
  const next = m.nextOffset;
  if (next !== null && (typeof next !== 'number' || !Number.isSafeInteger(next) || next < 0)) {
    throw new ProtocolError(`the grep tool's metadata has no valid nextOffset (got ${JSON.stringify(next)})`);
  }
  return {
    content,
    lines: parseSearchText(content),
    matches: count(m, 'matches'),
    offset: count(m, 'offset'),
    totalLines: count(m, 'totalLines'),
    nextOffset: next,
    longLines: count(m, 'longLines'),
  };
}
