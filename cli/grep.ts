import { Engine } from '../engine/engine.js';
import type { SearchResult } from '../engine/engine-search.js';
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { MAX_SEARCH_CONTEXT, MAX_SEARCH_LIMIT } from '../store/search.js';
import { readsAsRegex } from '../store/search-text.js';
import { parseArtifactUri } from '../store/uri.js';
import {
  type Command,
  EXIT_FAILURE,
  EXIT_OK,
  existingStore,
  forTerminal,
  HELP_OPTION,
  parseCommandLine,
  parseCount,
  STORE_OPTION,
  writeOut,
} from './common.js';

const USAGE = `Usage: sluice grep <pattern> <artifact-uri> [--regex] [--ignore-case] [--context N]
                   [--limit N] [--offset N] [--json] [--store DIR]

Searches the stored output of a tool call, like grep -n, with zero-based line
numbers: each one is an --offset for sluice read (and an offset for read).

  <pattern>         the text to find (a regular expression, RE2 syntax, with --regex)
  <artifact-uri>    artifact://<digest> or artifact://<digest>/<stream>
  --regex           treat <pattern> as a regular expression, matched within one line
  --ignore-case     ignore letter case
  --context N       lines of context before and after each match, 0 to ${MAX_SEARCH_CONTEXT} (default 0)
  --limit N         most matches, 1 to ${MAX_SEARCH_LIMIT} (default 100)
  --offset N        zero-based line to start at (the nextOffset of the page before)
  --json            print { content, lines: [{ line, text, match, cut? }], matches, offset,
                    totalLines, nextOffset, longLines } instead
  --store DIR       the store (default: $SLUICE_STORE, else ./.sluice)

Exit status: 0 when a line matched, 1 when none did (as grep), 2 bad usage or
arguments. When more matches follow, a note on stderr gives the --offset that goes on.
`;

const OPTIONS = {
  regex: { type: 'boolean' },
  'ignore-case': { type: 'boolean' },
  context: { type: 'string' },
  limit: { type: 'string' },
  offset: { type: 'string' },
  json: { type: 'boolean' },
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

/** The `--json` form: the documented fields. */
function jsonOf(r: SearchResult): string {
  const { content, lines, matches, offset, totalLines, nextOffset, longLines } = r;
  return JSON.stringify({ content, lines, matches, offset, totalLines, nextOffset, longLines });
}

/** The `grep` command. */
export const command: Command = {
  summary: 'search a stored artifact (artifact://<digest>[/<stream>]) like grep -n, lines zero-based',
  usage: USAGE,
  options: OPTIONS,
  positionals: [
    { name: '<pattern>', complete: 'none' },
    { name: '<artifact-uri>', complete: 'none' },
  ],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'grep');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length !== 2) {
      throw new BadArgumentsError(
        `sluice grep takes <pattern> <artifact-uri>, got ${positionals.length} arguments (see sluice grep --help)`,
      );
    }
    const [pattern, uri] = positionals as [string, string];
    // Checked before a store is looked for: a path or a malformed URI is EBADURI (exit 2), never a file.
    parseArtifactUri(uri);
    const context = parseCount('context', values.context);
    const limit = parseCount('limit', values.limit);
    const offset = parseCount('offset', values.offset);
    const dir = await existingStore(values.store, ctx.env);
    const engine = await Engine.open({ store: dir, builtins: true, concurrency: 1, minThreads: 1 });
    let result: SearchResult;
    try {
      result = await engine.search(uri, pattern, {
        ...(values.regex ? { regex: true } : {}),
        ...(values['ignore-case'] ? { ignoreCase: true } : {}),
        ...(context === undefined ? {} : { context }),
        ...(limit === undefined ? {} : { limit }),
        ...(offset === undefined ? {} : { offset }),
      });
    } finally {
      await engine.close();
    }
    await writeOut(ctx.stdout, values.json ? `${jsonOf(result)}\n` : forTerminal(ctx.stdout, result.content));
    if (!values.json && result.matches === 0 && !values.regex && readsAsRegex(pattern)) {
      await writeOut(
        ctx.stderr,
        `sluice grep: ${JSON.stringify(pattern)} was searched as literal text; add --regex to match it as a regular expression\n`,
      );
    }
    if (!values.json && result.nextOffset !== null) {
      await writeOut(ctx.stderr, `sluice grep: more matches may follow; continue with --offset ${result.nextOffset}\n`);
    }
    return result.matches > 0 ? EXIT_OK : EXIT_FAILURE;
  },
};
