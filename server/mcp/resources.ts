/**
 * Artifacts as MCP resources, for hosts that prefer `resources/read` to a
 * read tool. A resource URI is an artifact URI with an optional query that
 * pages it (`artifact://<digest>/<stream>?offset=2000`); a read returns one
 * page, exactly what the `read` tool would, and its `_meta` carries the URI
 * of the next page (null at the end). The store's URI grammar has no query:
 * the paging parameters are this layer's and are taken off before the
 * engine sees the URI.
 */
import { ErrorCode, McpError, type ReadResourceResult, type Resource } from '@modelcontextprotocol/sdk/types.js';
import type { Engine } from '../../engine/engine.js';
import type { ReadOptions, ReadResult } from '../../engine/engine-read.js';
import { toSluiceError } from '../../engine/protocol/errors.js';
import type { TerminalResult } from '../../engine/result.js';
import { formatArtifactUri, isArtifactUri } from '../../store/uri.js';
import { attachmentContent } from './result.js';

/** MCP's code for a resource that does not exist (the specification's, not JSON-RPC's). */
export const RESOURCE_NOT_FOUND = -32002;

/** Stream URIs a connection remembers for `resources/list` (the newest). */
export const LISTED_RESOURCES = 256;

const PAGING = ['offset', 'limit', 'byteOffset'] as const;

/** The resource templates: a stream of a call's manifest, or a single artifact, each with paging. */
export const RESOURCE_TEMPLATES = [
  {
    uriTemplate: 'artifact://{digest}/{stream}{?offset,limit,byteOffset}',
    name: 'artifact-stream',
    title: 'A stream of a sluice call',
    description:
      'One page (up to 2000 lines) of a stream a sluice call captured; offset is the zero-based first line, byteOffset continues a line longer than a page. The page _meta.next is the URI of the page after.',
    mimeType: 'text/plain',
  },
  {
    uriTemplate: 'artifact://{digest}{?offset,limit,byteOffset}',
    name: 'artifact',
    title: 'A sluice artifact',
    description: 'One page of a stored artifact (a single output, or a manifest of streams), paged like a stream.',
    mimeType: 'text/plain',
  },
];

/** Splits a resource URI into the artifact URI and its paging options; InvalidParams for anything else. */
export function parseResourceUri(uri: string): { base: string; paging: ReadOptions } {
  const q = uri.indexOf('?');
  const base = q === -1 ? uri : uri.slice(0, q);
  if (!isArtifactUri(base)) {
    throw new McpError(ErrorCode.InvalidParams, `only artifact:// URIs are resources, got ${JSON.stringify(uri)}`, {
      code: 'EBADURI',
    });
  }
  const paging: ReadOptions = {};
  for (const [key, value] of new URLSearchParams(q === -1 ? '' : uri.slice(q + 1))) {
    if (!(PAGING as readonly string[]).includes(key) || !/^[0-9]{1,15}$/.test(value)) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `resource query takes ${PAGING.join(', ')} as non-negative integers, got ${JSON.stringify(`${key}=${value}`)}`,
        { code: 'EBADARGS' },
      );
    }
    paging[key as (typeof PAGING)[number]] = Number(value);
  }
  return { base, paging };
}

/** The URI of the page after `page` of `base`, or null at the end. */
function nextUri(base: string, page: ReadResult, limit: number | undefined): string | null {
  if (page.nextOffset === null) return null;
  const q = new URLSearchParams({ offset: String(page.nextOffset) });
  if (page.nextByteOffset !== null) q.set('byteOffset', String(page.nextByteOffset));
  if (limit !== undefined) q.set('limit', String(limit));
  return `${base}?${q}`;
}

/** `resources/read`: one page of an artifact. ENOTFOUND is MCP's resource-not-found; a malformed URI or query, InvalidParams. */
export async function readResource(engine: Engine, uri: string, signal: AbortSignal): Promise<ReadResourceResult> {
  const { base, paging } = parseResourceUri(uri);
  let page: ReadResult;
  try {
    page = await engine.read(base, { ...paging, signal });
  } catch (err) {
    const e = toSluiceError(err);
    if (e.code === 'ENOTFOUND' || e.code === 'EUNKNOWNSTREAM') {
      throw new McpError(RESOURCE_NOT_FOUND, e.message, { code: e.code, uri });
    }
    if (e.code === 'EBADURI' || e.code === 'EBADARGS') {
      throw new McpError(ErrorCode.InvalidParams, e.message, { code: e.code });
    }
    throw new McpError(ErrorCode.InternalError, e.message, { code: e.code });
  }
  const meta = {
    offset: page.offset,
    lines: page.lines,
    totalLines: page.totalLines,
    nextOffset: page.nextOffset,
    nextByteOffset: page.nextByteOffset,
    lossy: page.lossy,
    next: nextUri(base, page, paging.limit),
  };
  const contents: ReadResourceResult['contents'] = [{ uri, mimeType: 'text/plain', text: page.content, _meta: meta }];
  (page.attachments ?? []).forEach((a, i) => {
    const c = attachmentContent(a, base, i);
    if (c.type === 'image' || c.type === 'audio') {
      contents.push({ uri: `${base}#attachment-${i}`, mimeType: c.mimeType, blob: c.data });
    }
  });
  return { contents };
}

/** The artifact streams a connection's calls published, newest last, at most {@link LISTED_RESOURCES}. */
export class ResourceList {
  private readonly items = new Map<string, Resource>();

  /** Remembers the streams of `r`. */
  add(r: TerminalResult): void {
    const o = r.output;
    const found: Resource[] = [];
    if (o?.kind === 'single') {
      found.push({
        uri: formatArtifactUri(o.digest),
        name: `${r.tool} ${r.callId}`,
        mimeType: 'text/plain',
        size: o.bytes,
      });
    } else if (o?.kind === 'streams') {
      for (const s of o.streams) {
        found.push({
          uri: formatArtifactUri(o.manifest, s.name),
          name: `${r.tool} ${r.callId} ${s.name}`,
          mimeType: 'text/plain',
          size: s.bytes,
        });
      }
    }
    for (const f of found) {
      this.items.delete(f.uri);
      this.items.set(f.uri, f);
    }
    while (this.items.size > LISTED_RESOURCES) this.items.delete(this.items.keys().next().value as string);
  }

  /** Every remembered resource, oldest first. */
  list(): Resource[] {
    return [...this.items.values()];
  }
}
