/**
 * `sluice read <filePath> [--offset N] [--limit N] [--json] [--store DIR]`:
 * one page of an artifact, file or directory, through `Engine.read`, the same
 * code path as a model's `read` call (the built-in tool in a worker, the
 * default approval policy: files inside the working directory only).
 *
 * An artifact page prints exactly as stored; a file prints as numbered lines.
 */
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_PAGE_LINES } from '../../store/read.js';
import { resolveStoreDir } from '../../store/store.js';
import { isArtifactUri, parseArtifactUri } from '../../store/uri.js';
import { Engine } from '../engine.js';
import { BadArgumentsError, NotFoundError } from '../protocol/errors.js';
import type { ReadResult } from '../read.js';
import {
  type Command,
  EXIT_OK,
  forTerminal,
  HELP_OPTION,
  parseCommandLine,
  parseCount,
  STORE_OPTION,
  writeOut,
} from './common.js';

const USAGE = `Usage: sluice read <filePath> [--offset N] [--limit N] [--json] [--store DIR]

Prints one page of an artifact, a file or a directory, as the read tool returns it:
an artifact exactly as stored (no line numbers), a file as numbered lines, a
directory as one entry a line. Files are read only inside the working directory.

  <filePath>     artifact://<digest>, artifact://<digest>/<stream>, or a path
  --offset N     zero-based line to start at (default 0)
  --limit N      lines in the page, 1 to ${MAX_PAGE_LINES} (default ${MAX_PAGE_LINES})
  --json         print { content, offset, lines, totalLines, nextOffset } instead
                 (nextOffset is null at the end; attachments are added for an image or PDF)
  --store DIR    the store (default: $SLUICE_STORE, else ./.sluice)
`;

const OPTIONS = {
  offset: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

async function isDirectory(dir: string): Promise<boolean> {
  const st = await fsp.stat(dir).catch(() => undefined);
  return st?.isDirectory() === true;
}

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
  const dir = resolveStoreDir(explicit, env);
  if (await isDirectory(dir)) return { dir, dispose: async () => {} };
  if (isArtifactUri(filePath.trimStart())) {
    parseArtifactUri(filePath);
    throw new NotFoundError(`no sluice store at ${dir} (choose one with --store DIR or $SLUICE_STORE)`, { dir });
  }
  const scratch = await fsp.mkdtemp(join(tmpdir(), 'sluice-read-'));
  return { dir: scratch, dispose: () => fsp.rm(scratch, { recursive: true, force: true }) };
}

/** The `--json` form: the documented fields, plus attachments only when there are some. */
function jsonOf(page: ReadResult): string {
  const { content, offset, lines, totalLines, nextOffset, attachments } = page;
  return JSON.stringify({ content, offset, lines, totalLines, nextOffset, ...(attachments ? { attachments } : {}) });
}

/** The `read` command. */
export const command: Command = {
  summary: 'print one page of an artifact (artifact://<digest>[/<stream>]), file or directory',
  usage: USAGE,
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'read');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length !== 1) {
      throw new BadArgumentsError(`sluice read takes exactly one <filePath>, got ${positionals.length}`);
    }
    const filePath = positionals[0] as string;
    const offset = parseCount('offset', values.offset);
    const limit = parseCount('limit', values.limit);
    const store = await storeFor(filePath, values.store, ctx.env);
    let page: ReadResult;
    try {
      const engine = await Engine.open({ store: store.dir, builtins: true, concurrency: 1, minThreads: 1 });
      try {
        page = await engine.read(filePath, {
          ...(offset === undefined ? {} : { offset }),
          ...(limit === undefined ? {} : { limit }),
        });
      } finally {
        await engine.close();
      }
    } finally {
      await store.dispose();
    }
    await writeOut(ctx.stdout, values.json ? `${jsonOf(page)}\n` : forTerminal(ctx.stdout, page.content));
    return EXIT_OK;
  },
};
