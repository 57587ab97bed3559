/** An MCP tool result reduced, on the host thread, to a sluice completion's text output and attachments. */
import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import { COMPLETION_BOUNDS } from '../../engine/protocol/limits.js';
import type { McpCallOutcome, McpSpillRef, McpSpillSpan } from '../../engine/protocol/mcp.js';
import type { Attachment } from '../../engine/protocol/messages.js';
import { claimSpan, isSpilled } from './spill.js';

/** A piece of the output: text, or a span of the spill file. */
type Part = string | McpSpillSpan;

/** Binary content (image, audio, blob) before it is placed: its base64 held, or a span of the spill file. */
interface Binary {
  /** Its place in the result's content, from 1. */
  item: number;
  mediaType: string;
  name?: string;
  data: string;
}

/**
 * Text items (and embedded text resources, and resource links as one line
 * each) become the output, joined with `\n` in order; images, audio and
 * binary resources become attachments within the bounds every completion
 * has (`COMPLETION_BOUNDS`: 16 of them, 28 MiB of base64 together). One past
 * those bounds is not attached and not dropped: it is written to the output
 * after the text, a line naming it and saying why, then its base64 on a line
 * of its own, so `read` reaches it. Strings the transport left in its spill
 * file (spill.ts) make the outcome `spilled`. A result with no text but
 * `structuredContent` uses its JSON as the output, so the model is not
 * handed an empty result (copied from the spill file when it was spilled).
 */
export function toOutcome(result: CallToolResult): McpCallOutcome {
  const texts: unknown[] = [];
  const binaries: Binary[] = [];
  let item = 0;
  for (const block of (result.content ?? []) as ContentBlock[]) {
    item++;
    switch (block.type) {
      case 'text':
        texts.push(block.text);
        break;
      case 'image':
      case 'audio':
        binaries.push({ item, mediaType: block.mimeType, data: block.data });
        break;
      case 'resource': {
        const r = block.resource;
        if ('text' in r && typeof r.text === 'string') texts.push(r.text);
        else if ('blob' in r && typeof r.blob === 'string') {
          binaries.push({ item, mediaType: r.mimeType ?? 'application/octet-stream', data: r.blob, name: r.uri });
        }
        break;
      }
      case 'resource_link':
        texts.push(`[resource: ${block.name} ${block.uri}]`);
        break;
      default:
        // A content type newer than this client: say so rather than drop it silently.
        texts.push(`[unsupported MCP content type ${JSON.stringify((block as { type?: unknown }).type)}]`);
    }
  }
  if (texts.length === 0 && result.structuredContent !== undefined) {
    const sc = result.structuredContent;
    // Only looked at here: partOf claims it below, once.
    texts.push(isSpilled(sc) ? sc : JSON.stringify(sc, null, 2));
  }
  let ref: Pick<McpSpillRef, 'token' | 'fd' | 'dev' | 'ino' | 'path'> | undefined;
  /** The text or span a value stands for, claiming its spill. */
  const partOf = (v: unknown): Part => {
    const claimed = claimSpan(v);
    if (!claimed) return v as string;
    ref ??= claimed.ref;
    return claimed.raw ? { ...claimed.span, raw: true } : claimed.span;
  };
  const parts: Part[] = [];
  texts.forEach((t, i) => {
    if (i > 0) parts.push('\n');
    parts.push(partOf(t));
  });
  const attachments: Attachment[] = [];
  const spilledAttachments: McpSpillRef['attachments'] = [];
  let count = 0;
  let bytes = 0;
  for (const b of binaries) {
    const part = partOf(b.data);
    const size = typeof part === 'string' ? part.length : part.end - part.start;
    if (count < COMPLETION_BOUNDS.attachments && bytes + size <= COMPLETION_BOUNDS.attachmentsBytes) {
      count++;
      bytes += size;
      const named = b.name !== undefined ? { name: b.name } : {};
      if (typeof part === 'string') attachments.push({ mediaType: b.mediaType, data: part, ...named });
      else spilledAttachments.push({ mediaType: b.mediaType, span: part, ...named });
      continue;
    }
    const why =
      count >= COMPLETION_BOUNDS.attachments
        ? `past ${COMPLETION_BOUNDS.attachments} attachments`
        : `past ${COMPLETION_BOUNDS.attachmentsBytes} bytes of attachments`;
    const what = `${b.mediaType}${b.name !== undefined ? ` ${b.name}` : ''}`;
    parts.push(
      `${parts.length > 0 ? '\n' : ''}[content ${b.item}: ${what}, ${size} bytes of base64, not attached (${why}); its base64 is the next line]\n`,
      part,
    );
  }
  const isError = result.isError === true;
  if (ref === undefined) return { text: (parts as string[]).join(''), attachments, isError };
  return { text: '', attachments, isError, spilled: { ...ref, parts, attachments: spilledAttachments } };
}
