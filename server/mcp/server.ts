/**
 * The MCP server on an engine (the SDK's low-level `Server`, so tools keep
 * the JSON Schemas the engine registered): every registered tool (the
 * built-ins, plugins, and the tools of configured MCP servers, which makes
 * it a gateway), each call one engine call recorded in the connection's
 * session, and the session's artifacts as resources. A transport is
 * attached by the caller: stdio (`sluice mcp`) or Streamable HTTP
 * (`sluice serve`'s `/mcp`).
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { CallHandle } from '../../engine/call/call-types.js';
import type { Engine } from '../../engine/engine.js';
import { packageVersion } from '../../engine/package-root.js';
import { z } from '../../engine/protocol/zod.js';
import type { ToolInfo } from '../../engine/registry.js';
import { callTool } from './call.js';
import { RESOURCE_TEMPLATES, ResourceList, readResource } from './resources.js';
import { resultOutputSchema } from './result.js';

/** What the server tells a host's model about every result. */
export const INSTRUCTIONS =
  'Tool results show bounded previews of their output. When a stream is cut, a line says how much was shown of how much and gives the exact read(filePath="artifact://...", offset=N) call that continues it: call the read tool with those arguments to see more, or grep to search it. Artifacts stay readable across sessions.';

/**
 * A request schema that accepts any params of `method`. The SDK parses a
 * request with the handler's schema before anything else and reports a
 * mismatch as Internal Error; with this one, bad params reach a check that
 * reports them as Invalid Params, as JSON-RPC wants.
 */
function anyParams<M extends string>(method: M) {
  return z.looseObject({ method: z.literal(method), params: z.unknown().optional() });
}

/** Tools that only read (what a host may run without asking). */
const READ_ONLY = new Set(['read', 'grep']);

/** One registered tool as MCP lists it. */
export function toMcpTool(t: ToolInfo): Tool {
  const schema = (t.argsSchema ?? {}) as Record<string, unknown>;
  // MCP requires an object schema; the draft marker is not part of the tool's contract.
  const { $schema: _s, ...inputSchema } = schema;
  return {
    name: t.name,
    description: t.description,
    inputSchema: { ...inputSchema, type: 'object' } as Tool['inputSchema'],
    outputSchema: resultOutputSchema() as Tool['outputSchema'],
    ...(READ_ONLY.has(t.name) && t.source === 'builtin' ? { annotations: { readOnlyHint: true } } : {}),
  };
}

/** Options of {@link createMcpServer}. */
export interface McpServerOptions {
  /** The sluice session every call of this connection is recorded in. */
  session: string;
  /** Called as each call starts (`sluice serve` tracks MCP calls like its own). */
  started?(handle: CallHandle, tool: string): void;
  /** Throws to refuse a call before it starts (`sluice serve`'s bound on calls at once); the client gets an MCP error with its code. */
  admit?(): void;
}

/** An SDK server whose tools are `engine`'s, for one connection. */
export function createMcpServer(engine: Engine, options: McpServerOptions): Server {
  const server = new Server(
    { name: 'sluice', version: packageVersion() },
    {
      capabilities: { tools: { listChanged: false }, resources: { listChanged: false } },
      instructions: INSTRUCTIONS,
    },
  );
  const resources = new ResourceList();
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: engine.tools().map(toMcpTool) }));
  server.setRequestHandler(anyParams('tools/call'), (request, extra) =>
    // The SDK's tools/call wrapper has checked it against CallToolRequestSchema (InvalidParams otherwise).
    callTool(engine, options.session, CallToolRequestSchema.parse(request), extra, {
      ...(options.started ? { started: options.started } : {}),
      ...(options.admit ? { admit: options.admit } : {}),
      finished: (r) => resources.add(r),
    }),
  );
  server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: resources.list() }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: RESOURCE_TEMPLATES }));
  server.setRequestHandler(anyParams('resources/read'), (request, extra) => {
    const r = ReadResourceRequestSchema.safeParse(request);
    if (!r.success) throw new McpError(ErrorCode.InvalidParams, `Invalid resources/read request: ${r.error.message}`);
    return readResource(engine, r.data.params.uri, extra.signal);
  });
  return server;
}
