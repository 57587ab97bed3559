/**
 * A terminal result as an MCP `tools/call` result: the model view as the
 * text content (what a model reads: bounded previews and read hints), the
 * attachments as image, audio or embedded blob content, and the result's
 * facts (status, manifest and stream refs, error) as `structuredContent`
 * under {@link resultOutputSchema}, which every listed tool declares.
 */
import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import type { Attachment } from '../../engine/protocol/messages.js';
import { z } from '../../engine/protocol/zod.js';
import type { TerminalResult } from '../../engine/result.js';
import {
  pageOutputRefSchema,
  serializedErrorSchema,
  singleOutputRefSchema,
  streamRefSchema,
  streamsOutputRefSchema,
  terminalResultSchema,
} from '../../engine/wire/shapes.js';
import { formatArtifactUri } from '../../store/uri.js';

const uri = z.string().describe('artifact://<digest>[/<stream>]: pass it to read as filePath');

/**
 * Every sluice tool's `structuredContent`: the terminal result's facts (call
 * id, tool, session, status, whether all output was captured, metadata,
 * duration), its published output with the `artifact://` URI of each part,
 * and the error's code and message when it failed. Derived from the wire
 * schema, so the two cannot drift.
 */
export const mcpStructuredResultSchema = terminalResultSchema
  .pick({ callId: true, tool: true, session: true, status: true, complete: true, metadata: true, durationMs: true })
  .extend({
    output: z
      .discriminatedUnion('kind', [
        singleOutputRefSchema.extend({ uri }),
        streamsOutputRefSchema.extend({ uri, streams: z.array(streamRefSchema.extend({ uri })) }),
        pageOutputRefSchema,
      ])
      .nullable()
      .describe('the published output; null when nothing could be published'),
    error: serializedErrorSchema.pick({ code: true, message: true }).optional(),
  });

/** A tool's `structuredContent` (see {@link mcpStructuredResultSchema}). */
export type McpStructuredResult = z.infer<typeof mcpStructuredResultSchema>;

let outputSchema: Record<string, unknown> | undefined;

/**
 * The JSON Schema every listed tool declares as its `outputSchema`: draft-07,
 * which the SDK's validator (Ajv) reads, without a `$schema` key.
 */
export function resultOutputSchema(): Record<string, unknown> {
  if (!outputSchema) {
    const { $schema: _s, ...rest } = z.toJSONSchema(mcpStructuredResultSchema, { io: 'output', target: 'draft-7' });
    outputSchema = rest;
  }
  return outputSchema;
}

/** The `structuredContent` of a result (see {@link mcpStructuredResultSchema}). */
export function structuredResult(r: TerminalResult): McpStructuredResult {
  let output: McpStructuredResult['output'] = null;
  const o = r.output;
  if (o?.kind === 'single') output = { ...o, uri: formatArtifactUri(o.digest) };
  else if (o?.kind === 'streams') {
    output = {
      kind: 'streams',
      manifest: o.manifest,
      uri: formatArtifactUri(o.manifest),
      streams: o.streams.map((s) => ({ ...s, uri: formatArtifactUri(o.manifest, s.name) })),
    };
  } else if (o?.kind === 'page') output = { ...o };
  return {
    callId: r.callId,
    tool: r.tool,
    ...(r.session !== undefined ? { session: r.session } : {}),
    status: r.status,
    complete: r.complete,
    output,
    metadata: r.metadata,
    ...(r.error ? { error: { code: r.error.code, message: r.error.message } } : {}),
    durationMs: r.durationMs,
  };
}

/** One attachment as MCP content: images and audio as such, anything else as an embedded blob resource. */
export function attachmentContent(a: Attachment, callId: string, index: number): ContentBlock {
  if (a.mediaType.startsWith('image/')) return { type: 'image', data: a.data, mimeType: a.mediaType };
  if (a.mediaType.startsWith('audio/')) return { type: 'audio', data: a.data, mimeType: a.mediaType };
  return {
    type: 'resource',
    // An attachment is not stored as an artifact: its URI only names it within this result.
    resource: { uri: a.name ?? `attachment://${callId}/${index}`, mimeType: a.mediaType, blob: a.data },
  };
}

/**
 * The MCP result of a finished call. Anything but success is `isError: true`
 * with its model view kept, so the model sees the output of a failing
 * command as it would on success.
 */
export function toCallToolResult(r: TerminalResult): CallToolResult {
  const content: ContentBlock[] = [{ type: 'text', text: r.model }];
  r.attachments.forEach((a, i) => {
    content.push(attachmentContent(a, r.callId, i));
  });
  return {
    content,
    structuredContent: structuredResult(r) as Record<string, unknown>,
    ...(r.status === 'success' ? {} : { isError: true }),
  };
}
