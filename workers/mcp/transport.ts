/**
 * The stdio transport to one MCP server: the SDK's message format framed
 * by a line splitter linear in the bytes (a message past 1 MiB is spilled
 * to a file, its large parts never held: spill.ts), over a child in its own
 * process group. Not the SDK's `StdioClientTransport`: that kills only its
 * one pid, so the real server behind `npx -y …` outlives it; it sends the
 * server's stderr to ours; and an oversized message shows only as a closed
 * connection. Here a message past `maxMessageBytes` is dropped up to its
 * newline (the stream stays in step) and, when its JSON-RPC id can be read
 * from its end (where the SDK's servers write it) or its start (Python's),
 * answered to the client as a JSON-RPC error for that one request
 * ({@link OVERSIZED_CODE}); one that starts with `method` (a request or
 * notification from the server) is just dropped; only a message whose id
 * cannot be found resets the connection. Nothing the server sends throws in
 * the pipe's listener: that would end the host thread, every connection with it.
 */
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { deserializeMessage, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { LineSplitter } from '../../engine/protocol/line-splitter.js';
import type { McpServerSpec } from '../../engine/protocol/mcp.js';
import { type PreparedSandbox, prepareSandboxed, unconfined } from '../sandbox/prepare.js';
import { HeldLimitError } from './skeleton.js';
import { releaseSpill, SPILL_BYTES, SPILL_QUEUE_BYTES, type SpilledMessage, SpillWriter } from './spill.js';

/** Bytes of the server's stderr kept for error messages (the newest). */
const STDERR_TAIL_BYTES = 2048;
/** After stdin is closed, how long the server has to exit before SIGTERM, then SIGKILL. */
const CLOSE_STEP_MS = 500;
/** Bytes of an oversized message's start and end kept to find its id. */
const ID_WINDOW_BYTES = 512;
/** The JSON-RPC error code of the answer that stands for an oversized response (connection.ts maps it to ERESOURCELIMIT). */
export const OVERSIZED_CODE = -32099;
/** The JSON-RPC error code of the answer that stands for a spilled response that could not be read (EPROTOCOL). */
export const UNREADABLE_CODE = -32098;
/** The JSON-RPC error code of the answer that stands for a spilled response holding too much outside its content (ERESOURCELIMIT). */
export const HELD_LIMIT_CODE = -32097;

/** The JSON-RPC error code of the answer that stands for a response whose spill the disk failed (ENOSPC, EIO: EDISK). */
export const DISK_CODE = -32096;

/** The answer standing for a spilled response that failed with `err`. */
function spillFailure(err: unknown): { code: number; message: string; data?: { errno: string; syscall: string } } {
  const message = (err as Error | undefined)?.message ?? String(err);
  if (err instanceof HeldLimitError) return { code: HELD_LIMIT_CODE, message };
  const os = err as { code?: unknown; syscall?: unknown } | undefined;
  if (typeof os?.code === 'string' && typeof os.syscall === 'string') {
    // The file system failed the spill (full, I/O error): the file is closed, the call fails typed.
    return {
      code: DISK_CODE,
      message: `the response could not be spilled to disk: ${message}`,
      data: { errno: os.code, syscall: os.syscall },
    };
  }
  return { code: UNREADABLE_CODE, message: `the response could not be read: ${message}` };
}

/** A JSON-RPC id as JSON writes it: a number in JSON's grammar, or a short string (JSON.parse still decides). */
const ID = String.raw`(-?(?:0|[1-9]\d*)|"(?:[^"\\]|\\.){0,200}")`;
const ID_AT_END = new RegExp(String.raw`"id"\s*:\s*${ID}\s*\}\s*\r?$`);
const ID_AT_START = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID}(?=\s*[,}])`);
/**
 * A request or notification from the server (the SDK writes `method` first,
 * and a request's id last): not an answer to any request of ours, so its
 * id must not fail one of them.
 */
const METHOD_AT_START = new RegExp(
  String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?(?:"id"\s*:\s*${ID}\s*,\s*)?"method"\s*:`,
);

/**
 * What the first and last bytes of an oversized message say it is: a
 * message from the server (`method`, no answer owed), the response to
 * request `id`, or nothing known. Never throws, whatever the bytes: this
 * runs in the pipe's 'data' listener.
 */
function idOfEnds(head: string, tail: string): { method: true } | { id: string | number } | undefined {
  if (METHOD_AT_START.test(head)) return { method: true };
  for (const m of [ID_AT_END.exec(tail), ID_AT_START.exec(head)]) {
    if (!m) continue;
    try {
      const id = JSON.parse(m[1] as string) as unknown;
      if (typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id))) return { id };
    } catch {
      // Text the regex let through (a bad escape): not an id.
    }
  }
  return undefined;
}

/** How the server process ended. */
export interface ServerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Lifecycle hooks, called on the host thread. */
export interface TransportHooks {
  /** The server process started: its pid is also its process group id. */
  spawned(pid: number): void;
  /** The server process exited (its group has been killed). */
  exited(pid: number): void;
  /**
   * A spill file was parsed for a response to a request sent with owner
   * `owner` ({@link OWNER_META}; undefined: none, or a request given up):
   * from now it is the owner's to close. Called before the message is delivered.
   */
  spilled(token: string, owner: string | undefined): void;
}

/**
 * The `_meta` key of a request naming its owner (an engine call), which
 * the transport strips before the request is written: a spilled response
 * to it belongs to that owner (host.ts), so no timer decides when it goes.
 */
export const OWNER_META = 'sluice.dev/owner';

type Id = string | number;

/** The owner a request carries in `_meta`, and the request as it is written (without it). */
function takeOwner(message: JSONRPCMessage): { owner: string | undefined; wire: JSONRPCMessage } {
  const params = (message as { params?: { _meta?: Record<string, unknown> } }).params;
  const owner = params?._meta?.[OWNER_META];
  if (typeof owner !== 'string' || !params?._meta) return { owner: undefined, wire: message };
  const { [OWNER_META]: _, ...meta } = params._meta;
  const rest = { ...params, _meta: meta };
  if (Object.keys(meta).length === 0) delete (rest as { _meta?: unknown })._meta;
  return { owner, wire: { ...message, params: rest } as JSONRPCMessage };
}

/** A stdio MCP transport whose server runs in its own process group. */
export class GroupStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  /** How the process ended, once it has. */
  exit: ServerExit | undefined;
  /** Set when the server sent a message over the size bound (the connection is then closed). */
  oversized: number | undefined;

  private readonly spec: McpServerSpec;
  private readonly hooks: TransportHooks;
  private readonly buffer: LineSplitter;
  private child: ChildProcessByStdio<Writable, Readable, Readable> | undefined;
  private stderr = '';
  /** Removes the server's limit cgroup once it has exited. */
  private releaseSandbox: () => Promise<void> = () => Promise.resolve();
  /** Messages in order; a spilled one is a promise until its skeleton is parsed. */
  private readonly inbox: Array<JSONRPCMessage | Promise<SpilledMessage | undefined>> = [];
  private readonly spillDir: string;
  /** The start and end of the oversized message being dropped. */
  private dropHead = '';
  private dropTail = Buffer.alloc(0);
  /** Whether the line being dropped was held, not spilled: its start is still to be kept. */
  private dropHeadOpen = false;
  private delivering = false;
  /** Owners of requests sent and not yet answered or cancelled, by JSON-RPC id. */
  private readonly owners = new Map<Id, string>();
  private closed: Promise<void> | undefined;
  private holds = 0;

  /** `spillDir`: where messages past 1 MiB are spilled (the store's tmp/). */
  constructor(spec: McpServerSpec, hooks: TransportHooks, spillDir: string) {
    this.spec = spec;
    this.hooks = hooks;
    this.spillDir = spillDir;
    this.buffer = new LineSplitter(spec.maxMessageBytes, SPILL_BYTES);
  }

  private readonly sink = {
    line: (bytes: Buffer) => {
      if (this.oversized !== undefined) return;
      try {
        this.inbox.push(deserializeMessage(bytes.toString('utf8')));
      } catch (err) {
        // A malformed line is skipped; the next one may be fine.
        this.onerror?.(err as Error);
      }
    },
    spill: () => {
      // A large message (a big tool result) is kept in a file, its large parts never in memory (spill.ts).
      const w = new SpillWriter(this.spillDir);
      let head = '';
      let tail = Buffer.alloc(0);
      return {
        write: (piece: Buffer) => {
          if (head.length < ID_WINDOW_BYTES) head += piece.subarray(0, ID_WINDOW_BYTES).toString('latin1');
          this.dropHead = head;
          tail = Buffer.concat([tail, piece.subarray(-ID_WINDOW_BYTES)]).subarray(-ID_WINDOW_BYTES);
          w.write(piece);
          // The file is written asynchronously: the pipe waits while too much is queued.
          if (w.queuedBytes >= SPILL_QUEUE_BYTES) this.holdUntil(w.drained());
        },
        end: () => {
          this.dropHead = '';
          const parsed = w.end().then(
            (m) => m,
            (err: unknown): SpilledMessage | undefined => {
              this.onerror?.(err as Error);
              // The request it answers must not wait forever: it gets an error in its place.
              const what = idOfEnds(head, tail.toString('latin1'));
              if (what === undefined || !('id' in what)) return undefined;
              return { value: { jsonrpc: '2.0', id: what.id, error: spillFailure(err) }, token: undefined };
            },
          );
          this.inbox.push(parsed);
          // Later lines wait in the pipe while this one is parsed, not in memory.
          this.holdUntil(parsed);
        },
        discard: () => void w.discard(),
      };
    },
    oversized: () => {
      this.dropTail = Buffer.alloc(0);
      // A line that was not spilled: its start comes to `dropped` first.
      this.dropHeadOpen = this.dropHead === '';
    },
    dropped: (piece: Buffer, end: boolean) => {
      if (!end) {
        if (this.dropHeadOpen && this.dropHead.length < ID_WINDOW_BYTES) {
          this.dropHead += piece.subarray(0, ID_WINDOW_BYTES - this.dropHead.length).toString('latin1');
        }
        this.dropTail = Buffer.concat([this.dropTail, piece.subarray(-ID_WINDOW_BYTES)]).subarray(-ID_WINDOW_BYTES);
        return;
      }
      const what = idOfEnds(this.dropHead, this.dropTail.toString('latin1'));
      this.dropHead = '';
      this.dropHeadOpen = false;
      this.dropTail = Buffer.alloc(0);
      // A message from the server (a request or notification): nothing of ours waits for it.
      if (what !== undefined && 'method' in what) return;
      const id = what?.id;
      if (id === undefined) {
        // No id to answer: the request it answers could wait forever, so the connection ends.
        this.oversized = this.spec.maxMessageBytes;
        this.kill();
        return;
      }
      this.inbox.push({
        jsonrpc: '2.0',
        id,
        error: {
          code: OVERSIZED_CODE,
          message: `the response is larger than ${this.spec.maxMessageBytes} bytes (maxMessageBytes)`,
          data: { maxMessageBytes: this.spec.maxMessageBytes },
        },
      });
    },
  };

  /** Stops reading the server's stdout until `p` settles. */
  private holdUntil(p: Promise<unknown>): void {
    const stdout = this.child?.stdout;
    if (!stdout) return;
    this.holds++;
    stdout.pause();
    void p.finally(() => {
      if (--this.holds === 0 && !this.exit) stdout.resume();
    });
  }

  /** The server's pid (= its process group id), while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The newest part of the server's stderr. */
  get stderrTail(): string {
    return this.stderr;
  }

  /** Spawns the server; resolves once it runs, rejects when it cannot start (ENOENT, EACCES). */
  start(): Promise<void> {
    if (this.child) throw new Error('the transport is already started');
    const env = { ...getDefaultEnvironment(), ...this.spec.env };
    // Under a sandbox, the command is bwrap's (EUNSUPPORTED here: the server never starts unconfined).
    let sandbox: PreparedSandbox;
    try {
      sandbox = this.spec.sandbox
        ? prepareSandboxed(this.spec.sandbox, this.spec.command, this.spec.args, this.spec.cwd, env)
        : unconfined(this.spec.command, this.spec.args);
    } catch (err) {
      // A rejection like a failed spawn's, so the add fails the same way, naming what is missing.
      return Promise.reject(err);
    }
    this.releaseSandbox = sandbox.release;
    const child = spawn(sandbox.file, sandbox.args, {
      cwd: this.spec.cwd,
      env,
      // Its own process group: the server and everything it starts are killed together.
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    let exited!: () => void;
    this.closed = new Promise((resolve) => {
      exited = resolve;
    });
    return new Promise((resolve, reject) => {
      child.once('spawn', () => {
        if (child.pid !== undefined) this.hooks.spawned(child.pid);
        resolve();
      });
      child.once('error', (err) => {
        // Spawn failure: no 'exit' follows, and nothing was started.
        this.exit ??= { code: null, signal: null };
        void this.releaseSandbox();
        exited();
        reject(err);
        this.onerror?.(err);
      });
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        const pid = child.pid;
        // Children of the server that hold its pipes would keep 'close' (and so the caller) waiting.
        if (pid !== undefined) {
          killGroup(pid, 'SIGKILL');
          this.hooks.exited(pid);
        }
        void this.releaseSandbox();
      });
      child.once('close', () => {
        // A line cut off by the server's end is never whole: its spill file goes now, not with the
        // host thread; so do the spills of messages parsed but not delivered (nothing will claim them).
        this.buffer.clear();
        this.dropInbox();
        this.owners.clear();
        exited();
        this.onclose?.();
      });
      child.stdin.on('error', (err) => this.onerror?.(err));
      child.stdout.on('error', (err) => this.onerror?.(err));
      child.stderr.on('data', (chunk: Buffer) => {
        this.stderr = (this.stderr + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
      });
      child.stdout.on('data', (chunk: Buffer) => this.onData(chunk));
    });
  }

  private onData(chunk: Buffer): void {
    if (this.oversized !== undefined) return;
    try {
      this.buffer.push(chunk, this.sink);
    } catch (err) {
      // Nothing the server sends may throw in this listener (the host thread would die with every
      // connection); should something still, this connection alone ends.
      this.onerror?.(err as Error);
      this.oversized ??= this.spec.maxMessageBytes;
      this.kill();
      return;
    }
    if (this.oversized !== undefined) return;
    if (!this.delivering && this.inbox.length > 0) {
      this.delivering = true;
      queueMicrotask(() => void this.deliver());
    }
  }

  /**
   * Hands messages to the client in order, a microtask apart: the SDK runs a
   * response's handler synchronously and drops the call's progress handler
   * with it, so a progress notification read with the result would be lost.
   * A spilled message's file is handed to the owner of the request it
   * answers before it is delivered (closed at once when there is none).
   */
  private async deliver(): Promise<void> {
    const next = this.inbox.shift();
    if (next === undefined) {
      this.delivering = false;
      return;
    }
    let message: JSONRPCMessage | undefined;
    if (next instanceof Promise) {
      const spilled = await next;
      const owner = this.answered(spilled?.value);
      if (spilled?.token !== undefined) this.hooks.spilled(spilled.token, owner);
      try {
        if (spilled) message = JSONRPCMessageSchema.parse(spilled.value);
      } catch (err) {
        this.onerror?.(err as Error);
      }
    } else {
      message = next;
      this.answered(message);
    }
    try {
      if (message) this.onmessage?.(message);
    } finally {
      queueMicrotask(() => void this.deliver());
    }
  }

  /** The owner of the request that `value` answers, forgotten now (undefined: none, or not a response). */
  private answered(value: unknown): string | undefined {
    if (value === null || typeof value !== 'object' || 'method' in value) return undefined;
    const id = (value as { id?: unknown }).id;
    if (typeof id !== 'string' && typeof id !== 'number') return undefined;
    const owner = this.owners.get(id);
    this.owners.delete(id);
    return owner;
  }

  /** Forgets the messages not yet delivered, closing their spill files once parsed. */
  private dropInbox(): void {
    for (const m of this.inbox.splice(0)) {
      if (m instanceof Promise) void m.then((s) => (s?.token !== undefined ? releaseSpill(s.token) : undefined));
    }
  }

  /** Writes one message, waiting for the pipe to drain when it is full. */
  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || stdin.destroyed || this.exit) return Promise.reject(new Error('the MCP server is not running'));
    const { owner, wire } = takeOwner(message);
    if ('method' in wire && 'id' in wire && owner !== undefined) this.owners.set(wire.id, owner);
    if ('method' in wire && wire.method === 'notifications/cancelled') {
      // The SDK has given up on that request: a late answer to it belongs to nobody.
      const id = (wire.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof id === 'string' || typeof id === 'number') this.owners.delete(id);
    }
    const child = this.child as ChildProcessByStdio<Writable, Readable, Readable>;
    return new Promise((resolve, reject) => {
      if (stdin.write(serializeMessage(wire))) return resolve();
      // A server that dies with its pipe full never drains it: the wait ends with it.
      const settle = (err?: Error) => {
        stdin.off('drain', onDrain);
        stdin.off('close', onGone);
        child.off('exit', onGone);
        if (err) reject(err);
        else resolve();
      };
      const onDrain = () => settle();
      const onGone = () => settle(new Error('the MCP server exited before it read the message'));
      stdin.on('drain', onDrain);
      stdin.once('close', onGone);
      child.once('exit', onGone);
    });
  }

  /** Kills the server's whole process group at once. */
  kill(): void {
    const pid = this.child?.pid;
    if (pid !== undefined && !this.exit) killGroup(pid, 'SIGKILL');
  }

  /** Ends politely: closes stdin (a stdio server exits at end of input), then SIGTERM, then SIGKILL. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child || !this.closed) return;
    if (!this.exit) {
      child.stdin.end();
      if (!(await settlesWithin(this.closed, CLOSE_STEP_MS)) && child.pid !== undefined) {
        killGroup(child.pid, 'SIGTERM');
        if (!(await settlesWithin(this.closed, CLOSE_STEP_MS))) killGroup(child.pid, 'SIGKILL');
      }
    }
    await this.closed;
    this.buffer.clear();
  }
}

/** Sends `signal` to process group `pgid`; a group that is already gone is fine. */
export function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: nothing left to kill.
  }
}

function settlesWithin(p: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    void p.then(() => {
      clearTimeout(t);
      resolve(true);
    });
  });
}
