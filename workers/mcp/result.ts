/** An MCP tool result reduced, on the host thread, to a sluice completion's text output and attachments. */
import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import type { McpCallOutcome, McpSpillRef } from '../../engine/protocol/mcp.js';
import type { Attachment } from '../../engine/protocol/messages.js';
import { claimSpan } from './spill.js';

/**
 * Text items (and embedded text resources, and resource links as one line
 * each) become the output, joined with `\n` in order; images, audio and
 * binary resources become attachments; a text the transport left in its
 * spill file (spill.ts) makes the outcome `spilled`. A result with no text but
 * `structuredContent` uses its JSON as the output, so the model is not handed
 * an empty result.
 */
export function toOutcome(result: CallToolResult): McpCallOutcome {
  const texts: string[] = [];
  const attachments: Attachment[] = [];
  for (const block of (result.content ?? []) as ContentBlock[]) {
    switch (block.type) {
      case 'text':
        texts.push(block.text);
        break;
      case 'image':
      case 'audio':
        attachments.push({ mediaType: block.mimeType, data: block.data });
        break;
      case 'resource': {
        const r = block.resource;
        if ('text' in r && typeof r.text === 'string') texts.push(r.text);
        else if ('blob' in r && typeof r.blob === 'string') {
          attachments.push({ mediaType: r.mimeType ?? 'application/octet-stream', data: r.blob, name: r.uri });
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
    texts.push(JSON.stringify(result.structuredContent, null, 2));
  }
  const outcome: McpCallOutcome = { text: '', attachments, isError: result.isError === true };
  // A text too large to hold is a span of the host's spill file: the worker reads it from there.
  let spilled: McpSpillRef | undefined;
  const parts: McpSpillRef['parts'] = [];
  texts.forEach((t, i) => {
    const claimed = claimSpan(t);
    if (claimed) spilled ??= { ...claimed.ref, parts };
    const part = claimed ? claimed.span : t;
    if (i > 0) parts.push('\n');
    parts.push(part);
  });
  if (spilled) outcome.spilled = spilled;
  else outcome.text = texts.join('\n');
  return outcome;
}
