/**
 * The built-in `read` tool: one tool for artifacts and files.
 *
 * - `artifact://<digest>[/<stream>]` is recognised first, before any path
 *   handling: it is parsed (a malformed URI is EBADURI and nothing touches the
 *   filesystem), prepared as `{ kind: 'artifact.read', digest, stream }`, and
 *   read from the store by possession of the URI. The page is the stored text
 *   exactly: no line numbers, no wrapper.
 * - Anything else is a filesystem path: `~` expanded, resolved against the
 *   working directory and through symlinks, prepared as
 *   `{ kind: 'fs.read', path, realPath }` for the host's approval policy,
 *   then read as numbered text lines, a directory listing, or an image/PDF
 *   attachment (detected by content).
 *
 * `read` is self-paginating: its page is bounded here (2000 lines, 2 MiB) and
 * the engine returns it as is, without retaining it as a new artifact or
 * truncating it. Metadata carries the continuation (`nextOffset`), from which
 * the engine adds a `[More: read(...)]` line to the model view.
 */
import { BadArgumentsError } from '../../engine/protocol/errors.js';
import { formatBytes } from '../../engine/protocol/units.js';
import { MAX_PAGE_LINES } from '../../store/pages.js';
import { isArtifactUri, parseArtifactUri } from '../../store/uri.js';
import { complete, defineTool, type PreparedOperation, type ToolContext, z } from '../tool.js';
import { type FsTarget, readFsTarget, resolveFsTarget } from './read-fs.js';

/** What `prepare` found, kept for `run` of the same call (the context object is per call). */
const prepared = new WeakMap<ToolContext, FsTarget>();

/**
 * True when `filePath` must be read as an artifact URI: it has the artifact
 * scheme in any case, even after leading whitespace. Such a string is never a
 * file name, so a malformed URI fails instead of falling back to the disk.
 */
function wantsArtifact(filePath: string): boolean {
  return isArtifactUri(filePath.trimStart());
}

function span(unit: string, offset: number, lines: number, totalLines: number): string {
  if (lines === 0) return `no ${unit} at offset ${offset} (${totalLines} in all)`;
  return `${unit} ${offset + 1}-${offset + lines} of ${totalLines}`;
}

/** byteOffset continues an artifact's long line; files are paged by line only (checked before any filesystem call). */
function byteOffsetOnFile(filePath: string, byteOffset: number): BadArgumentsError {
  return new BadArgumentsError(
    `byteOffset applies to artifact reads only; ${JSON.stringify(filePath)} is a file path`,
    { byteOffset },
  );
}

export default defineTool({
  name: 'read',
  description: [
    'Reads a file, a directory, or an artifact (the full output of an earlier tool call).',
    'filePath is a path (relative to the working directory, or absolute, or ~/...) or an artifact URI',
    'artifact://<digest> or artifact://<digest>/<stream> exactly as a truncation hint gives it.',
    'offset is the zero-based line to start at (default 0); limit is the number of lines (default and maximum 2000).',
    'Files come back as numbered lines, directories as one entry a line (directories end with /),',
    'images and PDFs as attachments; artifacts come back exactly as stored, without line numbers.',
    'When more lines follow, the output ends with a [More: read(filePath="...", offset=N)] line;',
    'a line longer than a page (2 MiB) continues with byteOffset, exactly as that line gives it.',
  ].join(' '),
  args: z.object({
    filePath: z.string().min(1).describe('A file or directory path, or artifact://<digest>[/<stream>]'),
    offset: z.number().int().nonnegative().optional().describe('Zero-based line to start at (default 0)'),
    limit: z
      .number()
      .int()
      .positive()
      .max(MAX_PAGE_LINES)
      .optional()
      .describe(`Lines to read, 1 to ${MAX_PAGE_LINES} (default ${MAX_PAGE_LINES})`),
    byteOffset: z
      .number()
      .int()
      .nonnegative()
      .optional()
      .describe('Artifacts only: bytes into the line at offset, to continue a line longer than a page (default 0)'),
  }),
  output: 'single',
  selfPaginating: true,
  async prepare(args, ctx): Promise<PreparedOperation> {
    if (wantsArtifact(args.filePath)) {
      // Parsing is pure: a malformed URI fails here, before any filesystem call.
      const { digest, stream } = parseArtifactUri(args.filePath);
      return { kind: 'artifact.read', uri: args.filePath, digest, stream: stream ?? null };
    }
    if (args.byteOffset !== undefined) throw byteOffsetOnFile(args.filePath, args.byteOffset);
    const target = await resolveFsTarget(args.filePath, ctx.cwd);
    prepared.set(ctx, target);
    return { kind: 'fs.read', path: target.path, realPath: target.realPath };
  },
  async run(args, ctx) {
    const offset = args.offset ?? 0;
    const limit = args.limit ?? MAX_PAGE_LINES;
    if (wantsArtifact(args.filePath)) {
      const byteOffset = args.byteOffset ?? 0;
      // The stored bytes themselves: the engine shows them as text, and `sluice read --raw` as they are.
      const page = await ctx.artifacts.readPageBytes(args.filePath, { offset, limit, byteOffset });
      const part =
        page.nextByteOffset !== null || byteOffset > 0
          ? ` (bytes ${byteOffset}-${page.nextByteOffset ?? 'end'} of line ${page.offset + 1})`
          : '';
      return complete.full(page.bytes, {
        display: `read ${args.filePath} · ${span('lines', page.offset, page.lines, page.totalLines)}${part}`,
        metadata: {
          kind: 'artifact',
          uri: args.filePath,
          digest: page.digest,
          ...(page.stream === undefined ? {} : { stream: page.stream }),
          offset: page.offset,
          ...(byteOffset > 0 ? { byteOffset } : {}),
          lines: page.lines,
          totalLines: page.totalLines,
          nextOffset: page.nextOffset,
          nextByteOffset: page.nextByteOffset,
          lossy: page.lossy,
        },
      });
    }
    if (args.byteOffset !== undefined) throw byteOffsetOnFile(args.filePath, args.byteOffset);
    let target = prepared.get(ctx);
    if (!target) {
      // The runtime always prepares first; should it not, the read is still approved before it happens.
      target = await resolveFsTarget(args.filePath, ctx.cwd);
      await ctx.host.approve({ kind: 'fs.read', path: target.path, realPath: target.realPath });
    }
    const read = await readFsTarget(target, offset, limit, ctx.signal);
    const where = { filePath: args.filePath, path: target.realPath };
    if (read.kind === 'media') {
      const { mediaType, name } = read.attachment;
      const text = `[${mediaType} attached: ${name ?? args.filePath}, ${read.bytes} bytes]\n`;
      return complete.full(text, {
        display: `read ${args.filePath} · ${mediaType}, ${formatBytes(read.bytes)}`,
        attachments: [read.attachment],
        metadata: {
          kind: mediaType === 'application/pdf' ? 'pdf' : 'image',
          ...where,
          mediaType,
          bytes: read.bytes,
          offset: 0,
          lines: 1,
          totalLines: 1,
          nextOffset: null,
          nextByteOffset: null,
          lossy: false,
        },
      });
    }
    return complete.full(read.content, {
      display: `read ${args.filePath} · ${span(read.kind === 'directory' ? 'entries' : 'lines', read.offset, read.lines, read.totalLines)}`,
      metadata: {
        kind: read.kind,
        ...where,
        offset: read.offset,
        lines: read.lines,
        totalLines: read.totalLines,
        nextOffset: read.nextOffset,
        nextByteOffset: null,
        lossy: read.lossy,
      },
    });
  },
});
