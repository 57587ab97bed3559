/** One live client connection to one MCP server, on the host thread; once closed it is never reused. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, ErrorCode, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  CancelledError,
  DiskError,
  ProtocolError,
  ResourceLimitError,
  type SluiceError,
  ToolFailedError,
  WorkerCrashError,
} from '../../engine/protocol/errors.js';
import type { McpCallOutcome, McpServerSpec, McpToolDef } from '../../engine/protocol/mcp.js';
import { toOutcome } from './result.js';
import {
  DISK_CODE,
  GroupStdioTransport,
  HELD_LIMIT_CODE,
  OVERSIZED_CODE,
  OWNER_META,
  type TransportHooks,
  UNREADABLE_CODE,
} from './transport.js';

/** Beyond reach (a call's duration is the caller's business), not the SDK's 60 s default. */
const NO_TIMEOUT_MS = 2 ** 31 - 1;
/** Pages of tools/list followed at most, against a server that never stops paginating. */
const MAX_LIST_PAGES = 100;

/** Progress reported by the server during a call. */
export interface McpProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** A connected MCP server. */
export class Connection {
  readonly spec: McpServerSpec;
  private readonly client: Client;
  private readonly transport: GroupStdioTransport;
  private closedFlag = false;

  private constructor(spec: McpServerSpec, client: Client, transport: GroupStdioTransport) {
    this.spec = spec;
    this.client = client;
    this.transport = transport;
  }

  /** Spawns the server and runs the MCP handshake. */
  static async open(
    spec: McpServerSpec,
    hooks: TransportHooks,
    version: string,
    spillDir: string,
  ): Promise<Connection> {
    const transport = new GroupStdioTransport(spec, hooks, spillDir);
    const client = new Client({ name: 'sluice', version });
    const conn = new Connection(spec, client, transport);
    client.onclose = () => {
      conn.closedFlag = true;
    };
    // Out-of-band transport errors (a malformed line) are not fatal; the call that suffers says why.
    client.onerror = () => {};
    try {
      await client.connect(transport, { timeout: NO_TIMEOUT_MS });
    } catch (err) {
      conn.closedFlag = true;
      transport.kill();
      await transport.close().catch(() => {});
      throw conn.describeFailure(err, 'start');
    }
    return conn;
  }

  /** False once the server has gone (it is then replaced on the next call). */
  get alive(): boolean {
    return !this.closedFlag && this.transport.exit === undefined;
  }

  /** Every tool the server lists (following pagination). */
  async listTools(): Promise<McpToolDef[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const r = await this.client
        .listTools(cursor === undefined ? {} : { cursor }, { timeout: NO_TIMEOUT_MS })
        .catch((err: unknown) => {
          throw this.describeFailure(err, 'list');
        });
      tools.push(...r.tools);
      cursor = r.nextCursor;
      if (cursor === undefined) break;
    }
    return tools.map((t) => ({
      name: t.name,
      description: t.description ?? t.title ?? '',
      inputSchema: t.inputSchema as Record<string, unknown>,
    }));
  }

  /**
   * Calls a tool; `signal` cancels the request (the server is told, the
   * connection stays); `owner` (an engine call) is handed a spill file of
   * the result (TransportHooks.spilled).
   */
  async call(
    tool: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; owner?: string; onProgress?: (p: McpProgress) => void },
  ): Promise<McpCallOutcome> {
    try {
      // A plain request, not callTool: that checks structuredContent against the tool's output
      // schema, which needs it whole, and a spilled one is a stand-in (spill.ts).
      const result = await this.client.request(
        {
          method: 'tools/call',
          params: {
            name: tool,
            arguments: args,
            ...(options.owner !== undefined ? { _meta: { [OWNER_META]: options.owner } } : {}),
          },
        },
        CallToolResultSchema,
        {
          signal: options.signal,
          timeout: NO_TIMEOUT_MS,
          ...(options.onProgress ? { onprogress: options.onProgress } : {}),
        },
      );
      return toOutcome(result as Parameters<typeof toOutcome>[0]);
    } catch (err) {
      if (options.signal.aborted) throw new CancelledError('the MCP call was cancelled');
      // Ours, not the server's (a spilled span claimed twice): already typed.
      if (err instanceof ProtocolError) throw err;
      throw this.describeFailure(err, 'call', tool);
    }
  }

  /** Closes politely (end of input, then signals to the group). */
  async close(): Promise<void> {
    this.closedFlag = true;
    await this.client.close().catch(() => {});
    await this.transport.close().catch(() => {});
  }

  /** Kills the server's process group now. */
  kill(): void {
    this.transport.kill();
  }

  /** The typed error for a failure of this connection, with the server's last words when it died. */
  private describeFailure(err: unknown, during: 'start' | 'list' | 'call', tool?: string): SluiceError {
    const server = JSON.stringify(this.spec.name);
    const t = this.transport;
    if (err instanceof McpError && err.code === OVERSIZED_CODE) {
      return new ResourceLimitError(
        `MCP server ${server}${tool ? `, tool ${JSON.stringify(tool)}` : ''}: the result is larger than ${this.spec.maxMessageBytes} bytes (maxMessageBytes)`,
        { server: this.spec.name, maxMessageBytes: this.spec.maxMessageBytes },
      );
    }
    if (err instanceof McpError && err.code === HELD_LIMIT_CODE) {
      return new ResourceLimitError(
        `MCP server ${server}${tool ? `, tool ${JSON.stringify(tool)}` : ''}: ${err.message}`,
        {
          server: this.spec.name,
        },
      );
    }
    if (err instanceof McpError && err.code === DISK_CODE) {
      const data = (err.data ?? {}) as { errno?: unknown; syscall?: unknown };
      return new DiskError(`MCP server ${server}${tool ? `, tool ${JSON.stringify(tool)}` : ''}: ${err.message}`, {
        server: this.spec.name,
        errno: String(data.errno),
        syscall: String(data.syscall),
      });
    }
    if (err instanceof McpError && err.code === UNREADABLE_CODE) {
      return new ProtocolError(`MCP server ${server}${tool ? `, tool ${JSON.stringify(tool)}` : ''}: ${err.message}`, {
        server: this.spec.name,
      });
    }
    if (t.oversized !== undefined) {
      return new ResourceLimitError(
        `MCP server ${server} sent a message larger than ${t.oversized} bytes (maxMessageBytes); the connection was reset`,
        { server, maxMessageBytes: t.oversized },
      );
    }
    const dead = t.exit !== undefined || (err instanceof McpError && err.code === ErrorCode.ConnectionClosed);
    if (dead || during === 'start') {
      const how = !t.exit
        ? 'it closed the connection'
        : t.exit.signal
          ? `killed by ${t.exit.signal}`
          : t.exit.code !== null
            ? `exit code ${t.exit.code}`
            : 'it could not be spawned';
      const what = during === 'call' ? `exited during the call to ${JSON.stringify(tool)}` : `failed to ${during}`;
      const reason = (err as { message?: unknown })?.message;
      const tail = t.stderrTail.trim();
      return new WorkerCrashError(
        `MCP server ${server} ${what} (${how})` +
          (during !== 'call' && typeof reason === 'string' ? `: ${reason}` : '') +
          (tail ? `; its stderr ends with: ${tail.slice(-400)}` : ''),
        { server: this.spec.name, exitCode: t.exit?.code ?? null, signal: t.exit?.signal ?? null },
      );
    }
    const message = err instanceof Error ? err.message : String(err);
    return new ToolFailedError(`MCP server ${server}${tool ? `, tool ${JSON.stringify(tool)}` : ''}: ${message}`, {
      server: this.spec.name,
      ...(err instanceof McpError ? { mcpCode: err.code } : {}),
    });
  }
}
