/**
 * The tool module of every MCP tool: registered once per tool as
 * `…/workers/mcp/tool.js?h=<host>&s=<server>&t=<tool>&n=<name>`, each URL
 * its own module instance, so `import.meta.url` says which tool it is. The
 * server's JSON Schema is checked in `prepare`, before approval of
 * `{ kind: 'mcp.call', … }`; the host thread makes the request and the
 * result is a full single output (or, when too large to hold, streamed
 * from the host thread's spill file); `isError` is a failed call.
 */
import type { Attachment } from '../../engine/protocol/messages.js';
import { z } from '../../engine/protocol/zod.js';
import { type CompletionFields, complete, defineTool, type ToolContext, type ToolDefinition } from '../tool.js';
import { hostCall, hostDef } from './client.js';
import { type ArgsValidator, compileInputSchema } from './schema.js';
import { writeSpilled } from './spill-read.js';

const params = new URL(import.meta.url).searchParams;
const hostId = params.get('h') ?? '';
const server = params.get('s') ?? '';
const toolName = params.get('t') ?? '';
const name = params.get('n') ?? '';

/** The compiled schema, fetched from the host thread once per thread (not cached when that fails). */
let validator: Promise<ArgsValidator> | undefined;

function getValidator(signal: AbortSignal): Promise<ArgsValidator> {
  if (!validator) {
    const v = hostDef(hostId, { server, tool: toolName }, { signal }).then(
      (def) => compileInputSchema(name, def.inputSchema).validate,
    );
    validator = v;
    v.catch(() => {
      if (validator === v) validator = undefined;
    });
  }
  return validator;
}

const NOTE_MAX = 200;

function errorNote(text: string): string {
  const first = text.split('\n', 1)[0]?.trim() ?? '';
  if (first.length === 0) return 'the MCP tool reported an error';
  return first.length > NOTE_MAX ? `${first.slice(0, NOTE_MAX)}…` : first;
}

function summary(bytes: number, attachments: Attachment[], isError: boolean): string {
  const parts = [`${bytes} B of text`];
  if (attachments.length > 0) {
    parts.push(attachments.map((a) => a.mediaType).join(', '));
  }
  return `${name}: ${isError ? 'error, ' : ''}${parts.join(', ')}`;
}

const defined = defineTool({
  name,
  // Replaced at registration by the server's description and JSON Schema.
  description: `MCP tool ${toolName} of server ${server}`,
  args: z.object({}),
  output: 'single',
  async prepare(args, ctx: ToolContext) {
    (await getValidator(ctx.signal))(args);
    return { kind: 'mcp.call', server, tool: toolName, arguments: args };
  },
  async run(args, ctx: ToolContext) {
    const outcome = await hostCall(
      hostId,
      { call: ctx.callId, server, tool: toolName, arguments: args as Record<string, unknown> },
      {
        signal: ctx.signal,
        onProgress: (p) =>
          ctx.display(
            `${p.total !== undefined ? `${p.progress}/${p.total}` : p.progress}${p.message ? ` ${p.message}` : ''}\n`,
          ),
      },
    );
    const fields = (bytes: number, attachments: Attachment[]): CompletionFields => ({
      display: summary(bytes, attachments, outcome.isError),
      metadata: { mcp: { server, tool: toolName } },
      ...(attachments.length > 0 ? { attachments } : {}),
    });
    const failed = (text: string) => (outcome.isError ? { status: 'failed' as const, note: errorNote(text) } : {});
    const spilled = outcome.spilled;
    if (spilled) {
      // Too large to hold: streamed from the host's spill file into the output (spill-read.ts); the
      // host keeps the file until the engine tells it this call has ended, whatever becomes of it.
      const { bytes, head, attachments } = await writeSpilled(spilled, ctx.stream(), ctx.signal);
      return complete.streamed({ ...fields(bytes, [...outcome.attachments, ...attachments]), ...failed(head) });
    }
    return complete.full(outcome.text, {
      ...fields(Buffer.byteLength(outcome.text), outcome.attachments),
      ...failed(outcome.text),
    });
  },
});

/** The tool: args pass as any object (the server's schema, applied in `prepare`, may allow extra fields). */
const tool: ToolDefinition = Object.freeze({ ...defined, args: z.looseObject({}) });
export default tool;
