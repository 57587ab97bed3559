/**
 * The built-in `grep` tool: searches stored artifacts (never the
 * filesystem) like `grep -n`, with zero-based line numbers for `read`.
 * Prepared as `artifact.read`; self-paginating like `read`, a page that
 * stopped early ending with the `grep(...)` call that goes on.
 */
import { BadUriError } from '../../engine/protocol/errors.js';
import { DEFAULT_SEARCH_LIMIT, MAX_SEARCH_CONTEXT, MAX_SEARCH_LIMIT } from '../../store/search.js';
import { formatSearchPage, literalPatternNote } from '../../store/search-text.js';
import { isArtifactUri, parseArtifactUri } from '../../store/uri.js';
import { complete, defineTool, type PreparedOperation, z } from '../tool.js';

/** The arguments as the model gave them. */
interface GrepArgs {
  filePath: string;
  pattern: string;
  regex?: boolean | undefined;
  ignoreCase?: boolean | undefined;
  context?: number | undefined;
  limit?: number | undefined;
  offset?: number | undefined;
}

/** The call that fetches the next page: the same arguments, the next offset (JSON-quoted strings). */
function grepContinuation(args: GrepArgs, nextOffset: number): string {
  const parts = [`filePath=${JSON.stringify(args.filePath)}`, `pattern=${JSON.stringify(args.pattern)}`];
  if (args.regex) parts.push('regex=true');
  if (args.ignoreCase) parts.push('ignoreCase=true');
  if (args.context) parts.push(`context=${args.context}`);
  if (args.limit !== undefined) parts.push(`limit=${args.limit}`);
  parts.push(`offset=${nextOffset}`);
  return `grep(${parts.join(', ')})`;
}

function artifactOnly(filePath: string): { digest: string; stream?: string } {
  if (!isArtifactUri(filePath.trimStart())) {
    throw new BadUriError(
      `grep searches artifacts only: filePath must be artifact://<digest>[/<stream>], got ${JSON.stringify(filePath)}`,
      { filePath },
    );
  }
  return parseArtifactUri(filePath);
}

export default defineTool({
  name: 'grep',
  description: [
    'Searches the stored output of an earlier tool call (an artifact), like grep -n.',
    'filePath is artifact://<digest> or artifact://<digest>/<stream> exactly as a truncation hint gives it.',
    'pattern is literal text unless regex is true (a regular expression in RE2 syntax, matched within one line: no backreferences or lookaround).',
    'Each result line is N:text for a match and N-text for a context line, N the zero-based line number:',
    'read(filePath, offset=N) reads from that line. When more matches follow, the output ends with a',
    '[More: grep(...)] line giving the exact call that continues.',
  ].join(' '),
  args: z.object({
    filePath: z.string().min(1).describe('artifact://<digest> or artifact://<digest>/<stream>'),
    pattern: z.string().min(1).describe('The text to find (a regular expression with regex: true)'),
    regex: z.boolean().optional().describe('Treat pattern as a regular expression, RE2 syntax (default false)'),
    ignoreCase: z.boolean().optional().describe('Ignore letter case (default false)'),
    context: z
      .number()
      .int()
      .nonnegative()
      .max(MAX_SEARCH_CONTEXT)
      .optional()
      .describe(`Lines of context before and after each match, 0 to ${MAX_SEARCH_CONTEXT} (default 0)`),
    limit: z
      .number()
      .int()
      .positive()
      .max(MAX_SEARCH_LIMIT)
      .optional()
      .describe(`Most matches to return, 1 to ${MAX_SEARCH_LIMIT} (default ${DEFAULT_SEARCH_LIMIT})`),
    offset: z
      .number()
      .int()
      .nonnegative()
      .optional()
      .describe('Zero-based line to start searching at (default 0; a [More: grep(...)] line gives it)'),
  }),
  output: 'single',
  selfPaginating: true,
  prepare(args): PreparedOperation {
    // Pure parsing: a path or a malformed URI fails here, before anything is read.
    const { digest, stream } = artifactOnly(args.filePath);
    return { kind: 'artifact.read', uri: args.filePath, digest, stream: stream ?? null };
  },
  async run(args, ctx) {
    artifactOnly(args.filePath);
    const offset = args.offset ?? 0;
    const page = await ctx.artifacts.search(args.filePath, {
      pattern: args.pattern,
      regex: args.regex === true,
      ignoreCase: args.ignoreCase === true,
      context: args.context ?? 0,
      limit: args.limit ?? DEFAULT_SEARCH_LIMIT,
      offset,
      signal: ctx.signal,
    });
    const note = literalPatternNote(args.pattern, args.regex === true, page.matches);
    const text = `${formatSearchPage(page, args.filePath, offset)}${note === undefined ? '' : `${note}\n`}`;
    return complete.full(text, {
      display: `grep ${JSON.stringify(args.pattern)} in ${args.filePath} · ${page.matches} ${page.matches === 1 ? 'match' : 'matches'}`,
      metadata: {
        kind: 'search',
        uri: args.filePath,
        digest: page.digest,
        ...(page.stream === undefined ? {} : { stream: page.stream }),
        pattern: args.pattern,
        offset,
        matches: page.matches,
        totalLines: page.totalLines,
        nextOffset: page.nextOffset,
        longLines: page.longLines,
        ...(page.nextOffset === null ? {} : { continuation: grepContinuation(args, page.nextOffset) }),
      },
    });
  },
});
