/**
 * `sluice read <filePath> [--offset N] [--limit N] [--byte-offset N] [--raw] [--json] [--store DIR]`:
 * one page through `Engine.read`, the code path of a model's `read` call. An
 * artifact page prints as stored (sanitised on a terminal unless `--raw`), a file as numbered lines.
 */
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../engine/engine.js';
import type { ReadBytesResult, ReadPageInfo, ReadResult } from '../engine/engine-read.js';
import { BadArgumentsError, NotFoundError } from '../engine/protocol/errors.js';
import { MAX_PAGE_LINES } from '../store/pages.js';
import { isArtifactUri, parseArtifactUri } from '../store/uri.js';
import {
  type Command,
  chosenStore,
  EXIT_OK,
  forTerminal,
  HELP_OPTION,
  parseCommandLine,
  parseCount,
  STORE_OPTION,
  writeOut,
} from './common.js';

const USAGE = `Usage: sluice read <filePath> [--offset N] [--limit N] [--byte-offset N] [--raw] [--json] [--store DIR]

Prints one page of an artifact, a file or a directory, as the read tool returns it:
an artifact exactly as stored (no line numbers), a file as numbered lines, a
directory as one entry a line. Files are read only inside the working directory.

  <filePath>        artifact://<digest>, artifact://<digest>/<stream>, or a path
  --offset N        zero-based line to start at (default 0)
  --limit N         lines in the page, 1 to ${MAX_PAGE_LINES} (default ${MAX_PAGE_LINES})
  --byte-offset N   artifacts only: bytes into the line at --offset, to continue a line
                    longer than a page (the nextByteOffset of the page before)
  --raw             write the page's bytes exactly as stored, invalid UTF-8 included, even
                    to a terminal (piped or redirected, the page is always its exact bytes;
                    on a terminal it is otherwise shown as sanitised text)
  --json            print { content, offset, lines, totalLines, nextOffset, nextByteOffset,
                    lossy } instead (nextOffset is null at the end; nextByteOffset is
                    non-null when the page stopped inside a line; lossy is true when
                    the page's bytes are not valid UTF-8, shown as U+FFFD in content;
                    attachments are added for an image or PDF)
  --store DIR       the store (default: $SLUICE_STORE, else ./.sluice)

When a page stops inside a line, a note on stderr gives the --byte-offset that continues it;
an --offset at or past the end prints nothing on stdout and says so on stderr (exit 0).
`;

const OPTIONS = {
  offset: { type: 'string' },
  limit: { type: 'string' },
  'byte-offset': { type: 'string' },
  raw: { type: 'boolean' },
  json: { type: 'boolean' },
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

/**
 * The store to open the engine on. Reading never creates a store: an artifact
 * read without one is ENOTFOUND (after the URI is checked, so a malformed URI
 * is still EBADURI); a file read without one runs on a throwaway store in the
 * system temporary directory (reads retain nothing, it stays empty).
 */
async function storeFor(
  filePath: string,
  explicit: string | undefined,
  env: NodeJS.ProcessEnv,
): Promise<{ dir: string; dispose(): Promise<void> }> {
  const { locator: dir, exists } = await chosenStore(explicit, env);
  if (exists) return { dir, dispose: async () => {} };
  if (isArtifactUri(filePath.trimStart())) {
    parseArtifactUri(filePath);
    throw new NotFoundError(`no sluice store at ${dir} (choose one with --store DIR or $SLUICE_STORE)`, { dir });
  }
  const scratch = await fsp.mkdtemp(join(tmpdir(), 'sluice-read-'));
  return { dir: scratch, dispose: () => fsp.rm(scratch, { recursive: true, force: true }) };
}

/** The `--json` form: the documented fields, plus attachments only when there are some. */
function jsonOf(page: ReadResult): string {
  const { content, offset, lines, totalLines, nextOffset, nextByteOffset, lossy, attachments } = page;
  return JSON.stringify({
    content,
    offset,
    lines,
    totalLines,
    nextOffset,
    nextByteOffset,
    lossy,
    ...(attachments ? { attachments } : {}),
  });
}

/** The read command's note on stderr when a page stopped inside a line: the exact command to go on. */
export function continuationNote(filePath: string, page: ReadPageInfo): string | undefined {
  if (page.nextByteOffset === null || page.nextOffset === null) return undefined;
  return `sluice read: the page stopped inside line ${page.nextOffset}; continue with --offset ${page.nextOffset} --byte-offset ${page.nextByteOffset} (${filePath})\n`;
}

/** The `read` command. */
export const command: Command = {
  summary: 'print one page of an artifact (artifact://<digest>[/<stream>]), file or directory',
  usage: USAGE,
  options: OPTIONS,
  positionals: [{ name: '<filePath>', complete: 'file' }],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'read');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length !== 1) {
      throw new BadArgumentsError(`sluice read takes exactly one <filePath>, got ${positionals.length}`);
    }
    if (values.raw && values.json) throw new BadArgumentsError('--raw and --json cannot be used together');
    const filePath = positionals[0] as string;
    const offset = parseCount('offset', values.offset);
    const limit = parseCount('limit', values.limit);
    const byteOffset = parseCount('byte-offset', values['byte-offset']);
    const options = {
      ...(offset === undefined ? {} : { offset }),
      ...(limit === undefined ? {} : { limit }),
      ...(byteOffset === undefined ? {} : { byteOffset }),
    };
    // Piped or redirected, the page is its exact bytes; a terminal gets sanitised text unless --raw says otherwise.
    const raw = values.raw === true || (!values.json && (ctx.stdout as NodeJS.WriteStream).isTTY !== true);
    const store = await storeFor(filePath, values.store, ctx.env);
    let page: ReadResult | ReadBytesResult;
    try {
      const engine = await Engine.open({ store: store.dir, builtins: true, concurrency: 1, minThreads: 1 });
      try {
        page = raw ? await engine.readBytes(filePath, options) : await engine.read(filePath, options);
      } finally {
        await engine.close();
      }
    } finally {
      await store.dispose();
    }
    if ('bytes' in page) await writeOut(ctx.stdout, page.bytes);
    else if (values.json) await writeOut(ctx.stdout, `${jsonOf(page)}\n`);
    else {
      // On a terminal the notes below share the screen: a last line without its newline gets one, so they
      // start on their own line (piped, the page is its exact bytes, above).
      const text = forTerminal(ctx.stdout, page.content);
      await writeOut(ctx.stdout, text === '' || text.endsWith('\n') ? text : `${text}\n`);
    }
    const note = values.json ? undefined : continuationNote(filePath, page);
    if (note !== undefined) await writeOut(ctx.stderr, note);
    // An empty page is also what a read past the end prints: say which it was (--json has the totals).
    if (!values.json && page.offset > 0 && page.offset >= page.totalLines) {
      await writeOut(
        ctx.stderr,
        `sluice read: offset ${page.offset} is past the end: ${page.totalLines} ${page.totalLines === 1 ? 'line' : 'lines'} (${filePath})\n`,
      );
    }
    // Shown as text, invalid bytes became U+FFFD: say so, and how to get them exactly.
    if (!raw && !values.json && page.lossy) {
      await writeOut(
        ctx.stderr,
        'sluice read: the page holds bytes that are not UTF-8, shown as U+FFFD; --raw writes them exactly\n',
      );
    }
    return EXIT_OK;
  },
};
