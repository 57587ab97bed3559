/**
 * The built-in `read` tool, for artifacts and files. An `artifact://` URI
 * is recognised first (malformed: EBADURI, the filesystem untouched),
 * prepared as `artifact.read` and read from the store as stored. Anything
 * else is a path, prepared as `{ kind: 'fs.read', path, realPath }` and read
 * as numbered lines, a listing or an attachment. Self-paginating: the page
 * is bounded here and returned as is, `nextOffset` in its metadata.
 */
import { BadArgumentsError } from '../../engine/protocol/errors.js';
import { formatBytes } from '../../engine/protocol/units.js';
import { MAX_PAGE_LINES } from '../../store/pages.js';
import { isArtifactUri, parseArtifactUri } from '../../store/uri.js';
import { complete, defineTool, type PreparedOperation, type ToolContext, z } from '../tool.js';
import { type FsTarget, readFsTarget, resolveFsTarget } from './read-fs.js';

/** What `prepare` found, kept for `run` of the same call (the context object is per call). */
const prepared = new WeakMap<ToolContext, FsTarget>();

/** True when `filePath` has the artifact scheme (any case, after leading blanks): never a file name. */
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
