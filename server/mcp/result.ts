/**
 * A terminal result as an MCP `tools/call` result: the model view as the
 * text content (what a model reads: bounded previews and read hints), the
 * attachments as image, audio or embedded blob content, and the result's
 * facts (status, manifest and stream refs, error) as `structuredContent`
 * under {@link RESULT_OUTPUT_SCHEMA}, which every listed tool declares.
 */
import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import type { Attachment } from '../../engine/protocol/messages.js';
import type { TerminalResult } from '../../engine/result.js';

const streamRef = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    digest: { type: 'string' },
    bytes: { type: 'integer' },
    lines: { type: 'integer' },
    truncated: { type: 'boolean' },
    uri: { type: 'string', description: 'artifact://<manifest>/<name>: pass it to read as filePath' },
  },
  required: ['name', 'digest', 'bytes', 'lines', 'truncated', 'uri'],
} as const;

/**
 * JSON Schema of every sluice tool's `structuredContent`: the call's id, tool,
 * session, status, whether all output was captured, the published output
 * (a single artifact, a manifest of streams, or a page a reader returned)
 * with the `artifact://` URI of each part, and the error when it failed.
 */
export const RESULT_OUTPUT_SCHEMA = {
  type: 'object',
  properties: {
    callId: { type: 'string' },
    tool: { type: 'string' },
    session: { type: 'string' },
    status: { type: 'string', enum: ['success', 'failed', 'cancelled'] },
    complete: { type: 'boolean', description: 'true when the tool finished normally and all its output was captured' },
    output: {
      description: 'the published output; null when nothing could be published',
      anyOf: [
        { type: 'null' },
        {
          type: 'object',
          properties: {
            kind: { const: 'single' },
            digest: { type: 'string' },
            bytes: { type: 'integer' },
            lines: { type: 'integer' },
            truncated: { type: 'boolean' },
            uri: { type: 'string' },
          },
          required: ['kind', 'digest', 'bytes', 'lines', 'truncated', 'uri'],
        },
        {
          type: 'object',
          properties: {
            kind: { const: 'streams' },
            manifest: { type: 'string' },
            uri: { type: 'string' },
            streams: { type: 'array', items: streamRef },
          },
          required: ['kind', 'manifest', 'uri', 'streams'],
        },
        {
          type: 'object',
          properties: { kind: { const: 'page' }, bytes: { type: 'integer' }, lines: { type: 'integer' } },
          required: ['kind', 'bytes', 'lines'],
        },
      ],
    },
    metadata: { type: 'object', description: "the tool's result metadata (bash: exitCode, signal, timedOut, ...)" },
    error: {
      type: 'object',
      properties: { code: { type: 'string' }, message: { type: 'string' } },
      required: ['code', 'message'],
    },
    durationMs: { type: 'number' },
  },
  required: ['callId', 'tool', 'status', 'complete', 'output', 'metadata', 'durationMs'],
} as const;

/** The `structuredContent` of a result (see {@link RESULT_OUTPUT_SCHEMA}). */
export function structuredResult(r: TerminalResult): Record<string, unknown> {
  let output: Record<string, unknown> | null = null;
  const o = r.output;
  if (o?.kind === 'single') output = { ...o, uri: `artifact://${o.digest}` };
  else if (o?.kind === 'streams') {
    output = {
      kind: 'streams',
      manifest: o.manifest,
      uri: `artifact://${o.manifest}`,
      streams: o.streams.map((s) => ({ ...s, uri: `artifact://${o.manifest}/${s.name}` })),
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
    structuredContent: structuredResult(r),
    ...(r.status === 'success' ? {} : { isError: true }),
  };
}
