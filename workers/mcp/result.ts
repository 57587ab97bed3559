/** An MCP tool result reduced, on the host thread, to a sluice completion's text output and attachments. */
import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import type { McpCallOutcome } from '../../engine/protocol/mcp.js';
import type { Attachment } from '../../engine/protocol/messages.js';

/**
 * Text items and resource links become the output, joined with `\n`;
 * images, audio and binary resources attachments. With no text,
 * `structuredContent`'s JSON is the output, never an empty result.
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
  return { text: texts.join('\n'), attachments, isError: result.isError === true };
}
