/**
 * The server side of MCP over stdio (newline-delimited JSON-RPC), bounded in
 * memory whatever the client does.
 *
 * Why not the SDK's `StdioServerTransport`: it reports a malformed line only
 * to the server's `onerror`, so the client never hears of it (JSON-RPC wants
 * a Parse error or Invalid Request reply); and it reads stdin however little
 * of stdout the client takes, so a client that sends requests but never
 * reads makes the responses pile up in memory. Here every write waits for
 * stdout to drain (one queue, in order, so stdout's own buffer never holds
 * more than one message past its high-water mark), stdin is paused while
 * the bytes waiting to be written pass a bound or too many requests are
 * unanswered, progress notifications are dropped rather than queued behind
 * a full pipe, and a line longer than the message bound is refused without
 * being held.
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
  /** Bytes waiting to be written or taken from stdout before stdin is paused and progress notifications are dropped. @default 1 MiB */
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
  /** Serialised messages waiting for stdout to drain, in order, each with the send it resolves. */
  private readonly queue: Array<{ text: string; bytes: number; written: () => void }> = [];
  /** Lines read while paused (the rest of the chunk that paused it): bounded by a chunk, handled on resume. */
  private backlog: Buffer[] = [];
  private queuedBytes = 0;

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
    this.stdout.on('drain', this.onDrain);
  }

  /** Bytes written but not yet taken by the client, and waiting to be written. */
  get bufferedBytes(): number {
    return this.stdout.writableLength + this.queuedBytes;
  }

  private readonly sink = {
    line: (bytes: Buffer) => {
      if (this.closed) return;
      // Paused by an earlier line of the same chunk: the rest waits as bytes, not as replies.
      if (this.paused) this.backlog.push(bytes);
      else {
        this.line(bytes.toString('utf8'));
        this.flow();
      }
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
    void this.write({ jsonrpc: '2.0', id, error: { code, message } });
  }

  /** Queues one message; resolves once stdout has taken it (at once, unwritten, when the transport is closed). */
  private write(message: unknown): Promise<void> {
    if (this.closed) return Promise.resolve();
    const text = `${JSON.stringify(message)}\n`;
    return new Promise((written) => {
      this.queue.push({ text, written, bytes: Buffer.byteLength(text) });
      this.queuedBytes += Buffer.byteLength(text);
      this.pump();
      this.flow();
    });
  }

  /** Writes queued messages while stdout does not need to drain. */
  private pump(): void {
    while (this.queue.length > 0 && !this.stdout.writableNeedDrain && !this.closed) {
      const m = this.queue.shift() as { text: string; bytes: number; written: () => void };
      this.queuedBytes -= m.bytes;
      this.stdout.write(m.text);
      m.written();
    }
  }

  private readonly onDrain = (): void => {
    this.pump();
    this.flow();
  };

  /** Pauses stdin while output is backed up or too many requests wait; resumes it once neither holds. */
  private readonly flow = (): void => {
    if (this.closed) return;
    const hold = this.bufferedBytes > this.maxQueuedBytes || this.pending.size >= this.maxPending;
    if (hold && !this.paused) {
      this.paused = true;
      this.stdin.pause();
    } else if (!hold && this.paused) {
      this.paused = false;
      while (this.backlog.length > 0 && !this.paused && !this.closed) {
        this.line((this.backlog.shift() as Buffer).toString('utf8'));
        this.flow();
      }
      if (!this.paused) this.stdin.resume();
    }
  };

  /** Sends one message; resolves once stdout has taken it (progress behind a full pipe is dropped). */
  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return;
    const isResponse = 'id' in message && !('method' in message);
    if (isResponse) this.pending.delete(JSON.stringify(message.id));
    else if ('method' in message && message.method === 'notifications/progress') {
      if (this.bufferedBytes > this.maxQueuedBytes) return;
    }
    await this.write(message);
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
    this.stdout.off('drain', this.onDrain);
    this.stdin.pause();
    // Nothing more is written: the sends waiting on the queue end.
    for (const m of this.queue.splice(0)) m.written();
    this.queuedBytes = 0;
    this.backlog = [];
    this.lines.clear();
    this.onclose?.();
  }
}
