/**
 * The server side of MCP over stdio (newline-delimited JSON-RPC), bounded in
 * memory whatever the client does.
 *
 * Why not the SDK's `StdioServerTransport`: it reports a malformed line only
 * to the server's `onerror`, so the client never hears of it (JSON-RPC wants
 * a Parse error or Invalid Request reply); and it reads stdin however little
 * of stdout the client takes, so a client that sends requests but never
 * reads makes the responses pile up in memory. Here stdin is paused while
 * stdout is backed up or too many requests are unanswered, progress
 * notifications are dropped rather than queued behind a full pipe, and a
 * line longer than the message bound is refused without being held.
 */
import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { LineSplitter } from '../../engine/protocol/line-splitter.js';

/** Options of {@link BoundedStdioTransport}. */
export interface BoundedStdioOptions {
  /** Longest message line accepted, in bytes; a longer one is answered Invalid Request and skipped. @default 4 MiB */
  maxMessageBytes?: number;
  /** Requests read but not yet answered before stdin is paused. @default 256 */
  maxPending?: number;
  /** Bytes queued on stdout before stdin is paused and progress notifications are dropped. @default 1 MiB */
  maxQueuedBytes?: number;
}

const MiB = 1024 * 1024;

type Id = string | number;

function idOf(v: unknown): Id | null {
  const id = (v as { id?: unknown } | null)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** A stdio server transport that holds a bounded amount of memory (see the module comment). */
export class BoundedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly stdin: Readable;
  private readonly stdout: Writable;
  private readonly maxMessageBytes: number;
  private readonly maxPending: number;
  private readonly maxQueuedBytes: number;
  private readonly pending = new Set<string>();
  private readonly lines: LineSplitter;
  private paused = false;
  private closed = false;

  constructor(stdin: Readable, stdout: Writable, options: BoundedStdioOptions = {}) {
    this.stdin = stdin;
    this.stdout = stdout;
    this.maxMessageBytes = options.maxMessageBytes ?? 4 * MiB;
    this.lines = new LineSplitter(this.maxMessageBytes);
    this.maxPending = options.maxPending ?? 256;
    this.maxQueuedBytes = options.maxQueuedBytes ?? MiB;
  }

  /** Starts reading stdin. */
  async start(): Promise<void> {
    this.stdin.on('data', this.onData);
    this.stdin.once('end', this.onEnd);
    this.stdin.on('error', this.onStreamError);
    this.stdout.on('error', this.onStreamError);
    this.stdout.on('drain', this.flow);
  }

  private readonly sink = {
    line: (bytes: Buffer) => {
      if (!this.closed) this.line(bytes.toString('utf8'));
    },
    oversized: () => this.reply(null, ErrorCode.InvalidRequest, `message longer than ${this.maxMessageBytes} bytes`),
  };

  private readonly onData = (chunk: Buffer): void => {
    this.lines.push(chunk, this.sink);
    this.flow();
  };

  private line(text: string): void {
    if (text.trim() === '') return;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      this.reply(null, ErrorCode.ParseError, `Parse error: ${(err as Error).message}`);
      return;
    }
    const r = JSONRPCMessageSchema.safeParse(json);
    if (!r.success) {
      this.reply(idOf(json), ErrorCode.InvalidRequest, 'Invalid Request: not a JSON-RPC 2.0 message');
      return;
    }
    const message = r.data;
    if ('method' in message && 'id' in message) this.pending.add(JSON.stringify(message.id));
    // The SDK sends no response to a cancelled request: without this, each cancel would count
    // against maxPending for good, and after that many stdin would stay paused (EOF unheard).
    else if ('method' in message && message.method === 'notifications/cancelled') {
      const requestId = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if (requestId !== undefined) this.pending.delete(JSON.stringify(requestId));
    }
    this.onmessage?.(message);
  }

  private reply(id: Id | null, code: number, message: string): void {
    this.write({ jsonrpc: '2.0', id, error: { code, message } });
  }

  private write(message: unknown): boolean {
    if (this.closed) return true;
    return this.stdout.write(`${JSON.stringify(message)}\n`);
  }

  /** Pauses stdin while stdout is backed up or too many requests wait; resumes it once neither holds. */
  private readonly flow = (): void => {
    if (this.closed) return;
    const hold = this.stdout.writableLength > this.maxQueuedBytes || this.pending.size >= this.maxPending;
    if (hold && !this.paused) {
      this.paused = true;
      this.stdin.pause();
    } else if (!hold && this.paused) {
      this.paused = false;
      this.stdin.resume();
    }
  };

  /** Sends one message; resolves once stdout has taken it (progress behind a full pipe is dropped). */
  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return;
    const isResponse = 'id' in message && !('method' in message);
    if (isResponse) this.pending.delete(JSON.stringify(message.id));
    else if ('method' in message && message.method === 'notifications/progress') {
      if (this.stdout.writableLength > this.maxQueuedBytes) return;
    }
    const ok = this.write(message);
    this.flow();
    if (!ok) await new Promise<void>((resolve) => this.stdout.once('drain', resolve));
  }

  private readonly onEnd = (): void => {
    void this.close();
  };

  private readonly onStreamError = (err: Error): void => {
    this.onerror?.(err);
    void this.close();
  };

  /** Stops reading; the server's `onclose` runs once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stdin.off('data', this.onData);
    this.stdin.off('end', this.onEnd);
    this.stdout.off('drain', this.flow);
    this.stdin.pause();
    this.lines.clear();
    this.onclose?.();
  }
}
