/** One call inside a worker: the tool context and what finalising the call needs. */
import { Writable } from 'node:stream';
import { CallEndpoint } from '../engine/protocol/call-endpoint.js';
import { ResourceLimitError, UndeclaredStreamError } from '../engine/protocol/errors.js';
import { MAX_CHUNK_BYTES } from '../engine/protocol/limits.js';
import type { TextKind } from '../engine/protocol/messages.js';
import type { SandboxPolicy } from '../engine/protocol/sandbox.js';
import { type OutputDeclaration, streamNames } from '../engine/protocol/streams.js';
import { unitCutAfter } from '../engine/protocol/text.js';
import { CreditGate } from './credit.js';
import { post, postChunk, postText } from './engine-port.js';
import { prepareSandboxed, unconfined } from './sandbox/prepare.js';
import type { ArtifactReader, HostServices, ToolContext } from './tool.js';
import { takeHandedOver } from './transfer.js';
import { StringCarry } from './utf8.js';

/** Pending display text is capped at this many characters (oldest part elided). */
const DISPLAY_PENDING_MAX = 64 * 1024;
/** Trimming below the cap keeps appends amortised O(appended). */
const DISPLAY_PENDING_LOW = (DISPLAY_PENDING_MAX * 3) / 4;
/** Starts pending display text whose oldest part was dropped. */
const DISPLAY_ELIDED = '[… display elided]\n';

/**
 * Most a stream writer queues (bytes, or UTF-16 units) before it refuses
 * writes: Buffers live outside the heap limit, so a tool ignoring
 * backpressure would grow the worker without bound.
 */
export function writeQueueBound(window: number): number {
  return Math.max(16 * 1024 * 1024, 4 * window);
}

/** A quarter of the window: several messages in flight, none needing more credit than the window. */
function chunkBytesFor(window: number): number {
  // At least one code point, so a split always makes progress.
  return Math.max(4, Math.min(MAX_CHUNK_BYTES, Math.floor(window / 4)));
}

/** The writer of one output stream. */
class StreamWriter extends Writable {
  private readonly run: CallRun;
  private readonly index: number;
  private readonly textCarry = new StringCarry();
  private readonly chunkBytes: number;
  private readonly stringStep: number;
  private readonly queueBound: number;
  sent = 0;

  constructor(run: CallRun, index: number) {
    const chunkBytes = chunkBytesFor(run.gate.window);
    super({ decodeStrings: false, highWaterMark: chunkBytes });
    this.run = run;
    this.index = index;
    this.chunkBytes = chunkBytes;
    this.stringStep = Math.max(1, Math.floor(chunkBytes / 3));
    this.queueBound = writeQueueBound(run.gate.window);
  }

  override write(
    chunk: unknown,
    encoding?: BufferEncoding | ((error: Error | null | undefined) => void),
    cb?: (error: Error | null | undefined) => void,
  ): boolean {
    if (this.writableLength > this.queueBound && !this.destroyed) {
      // No error event (a tool without an 'error' listener would crash its worker): queued writes
      // fail their callbacks and the violation fails the call.
      const name = this.run.names[this.index] || 'output';
      this.run.violation ??= new ResourceLimitError(
        `the tool kept writing to ${name} while ${this.writableLength} bytes waited (write() returned false; wait for 'drain'); the bound is ${this.queueBound}`,
        { stream: name, queued: this.writableLength, bound: this.queueBound },
      );
      this.destroy();
    }
    return super.write(chunk, encoding as BufferEncoding, cb);
  }

  override _write(chunk: unknown, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (typeof chunk === 'string' && chunk.length > this.stringStep) {
      this.sendString(chunk).then(() => cb(), cb);
      return;
    }
    const b = this.toBytes(chunk);
    if (b instanceof Error) {
      cb(b);
      return;
    }
    this.send(b.bytes, b.owned).then(() => cb(), cb);
  }

  /** Writes queued behind a chunk in flight leave as one message, not one each. */
  override _writev(
    chunks: Array<{ chunk: unknown; encoding: BufferEncoding }>,
    cb: (err?: Error | null) => void,
  ): void {
    this.sendGathered(chunks.map((c) => c.chunk)).then(() => cb(), cb);
  }

  /**
   * Sends queued writes as few messages as possible, copying a byte at most
   * once. Encoded here, in order: a string's surrogate carry must meet the
   * writes in the tool's order.
   */
  private async sendGathered(chunks: readonly unknown[]): Promise<void> {
    let group: Uint8Array[] = [];
    let groupBytes = 0;
    const flush = async () => {
      if (groupBytes === 0) return;
      const buf = Buffer.allocUnsafeSlow(groupBytes);
      let at = 0;
      for (const g of group) {
        buf.set(g, at);
        at += g.length;
      }
      group = [];
      groupBytes = 0;
      await this.send(buf, true);
    };
    for (const chunk of chunks) {
      if (typeof chunk === 'string' && chunk.length > this.stringStep) {
        await flush();
        await this.sendString(chunk);
        continue;
      }
      const p = this.toBytes(chunk);
      if (p instanceof Error) throw p;
      if (p.bytes.length >= this.chunkBytes / 2) {
        await flush();
        await this.send(p.bytes, p.owned);
        continue;
      }
      if (groupBytes + p.bytes.length > this.chunkBytes) await flush();
      group.push(p.bytes);
      groupBytes += p.bytes.length;
    }
    await flush();
  }

  /** The bytes to store (a string as UTF-8, bytes exactly), and whether we own them to transfer. */
  private toBytes(chunk: unknown): { bytes: Uint8Array; owned: boolean } | Error {
    if (typeof chunk === 'string') return { bytes: this.textCarry.push(chunk), owned: true };
    if (chunk instanceof Uint8Array) {
      // A high surrogate left waiting never gets its pair: U+FFFD.
      if (this.textCarry.holding) return { bytes: Buffer.concat([this.textCarry.end(), chunk]), owned: true };
      // Copied on the way out unless handed over (workers/transfer.ts).
      return { bytes: chunk, owned: takeHandedOver(chunk) };
    }
    return new TypeError(`stream writers accept strings and Uint8Arrays, not ${describeValue(chunk)}`);
  }

  /** Encodes and sends a long string a slice at a time, so it is never copied whole. */
  private async sendString(s: string): Promise<void> {
    for (let i = 0; i < s.length; i += this.stringStep) {
      await this.send(this.textCarry.push(s.slice(i, i + this.stringStep)), true);
    }
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.send(this.textCarry.end(), true).then(() => cb(), cb);
  }

  /** Posts `bytes` in messages of at most {@link chunkBytes}, each after its credit. */
  private async send(bytes: Uint8Array, owned: boolean): Promise<void> {
    let off = 0;
    while (off < bytes.length) {
      const piece = bytes.subarray(off, off + this.chunkBytes);
      const wait = this.run.gate.acquire(piece.length);
      if (wait) await wait;
      // A moved piece (and the view it was cut from) is empty after posting.
      const n = piece.length;
      postChunk(this.run.callId, this.index, piece, owned && n === bytes.length);
      this.sent += n;
      off += n;
    }
  }
}

/** A value of the wrong type, described for error messages. */
export function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return `an object (${(v as object).constructor?.name ?? 'no prototype'})`;
  return `a ${typeof v}`;
}

/** State of one call in this worker. */
export class CallRun {
  readonly callId: string;
  readonly gate: CreditGate;
  readonly abort = new AbortController();
  readonly writers = new Map<string, StreamWriter>();
  readonly names: readonly string[];
  /** The first contract violation: it fails the call whatever the tool does. */
  violation: Error | undefined;
  private readonly endpoint: CallEndpoint;
  private hostProxy: HostServices | undefined;
  private hostRpc: Promise<HostServices> | undefined;
  private displayPieces: string[] = [];
  private displayChars = 0;
  private displayElided = false;
  private displayFlushing: Promise<void> | undefined;

  constructor(callId: string, window: number, output: OutputDeclaration) {
    this.callId = callId;
    this.gate = new CreditGate(window);
    this.names = streamNames(output);
    this.endpoint = new CallEndpoint((m) => post({ t: 'rpc', c: callId, m }));
  }

  /**
   * Host services through comlink, loaded on the first request: most calls
   * make none. The engine answers only after a request, so nothing arrives
   * before comlink listens.
   */
  get host(): HostServices {
    this.hostProxy ??= { approve: (op) => this.hostServices().then((h) => h.approve(op)) };
    return this.hostProxy;
  }

  private hostServices(): Promise<HostServices> {
    this.hostRpc ??= import('../engine/protocol/rpc.js').then(({ Comlink, installErrorTransfer }) => {
      installErrorTransfer();
      return Comlink.wrap<HostServices>(this.endpoint.asComlink()) as unknown as HostServices;
    });
    return this.hostRpc;
  }

  /** Delivers an rpc message from the engine. */
  deliverRpc(m: unknown): void {
    this.endpoint.deliver(m);
  }

  /** The writer for `name` (the single output when omitted). */
  writer(name?: string): StreamWriter {
    const key = name ?? '';
    const existing = this.writers.get(key);
    if (existing) return existing;
    const index = this.names.indexOf(key);
    if (index === -1) {
      const err = new UndeclaredStreamError(
        name === undefined
          ? `this tool declares named streams; ctx.stream() needs one of: ${this.names.join(', ')}`
          : `stream ${JSON.stringify(name)} is not declared by this tool (declared: ${this.names.join(', ') || 'single output'})`,
        { stream: key },
      );
      this.violation ??= err;
      throw err;
    }
    const w = new StreamWriter(this, index);
    this.writers.set(key, w);
    return w;
  }

  /** True when any stream writer has been created and written to. */
  get streamed(): boolean {
    for (const w of this.writers.values()) if (w.sent > 0 || w.writableLength > 0) return true;
    return false;
  }

  /** Appends display text; coalesced while waiting for credit. */
  display(text: string): void {
    if (typeof text !== 'string' || text.length === 0) return;
    this.displayPieces.push(text);
    this.displayChars += text.length;
    if (this.displayChars > DISPLAY_PENDING_MAX) this.trimDisplay();
    this.kickDisplay();
  }

  /** Drops the oldest pending display text to the low-water mark, never inside a surrogate pair. */
  private trimDisplay(): void {
    let drop = this.displayChars - DISPLAY_PENDING_LOW;
    while (drop > 0) {
      const first = this.displayPieces[0] as string;
      if (first.length <= drop) {
        this.displayPieces.shift();
        this.displayChars -= first.length;
        drop -= first.length;
        continue;
      }
      const cut = unitCutAfter(first, drop);
      // A slice could keep the whole original alive.
      this.displayPieces[0] = Buffer.from(first.slice(cut), 'utf8').toString('utf8');
      this.displayChars -= cut;
      drop = 0;
    }
    this.displayElided = true;
  }

  private kickDisplay(): void {
    if (this.displayFlushing) return;
    // Cleared only once the flush settles: text appended meanwhile starts another, not stranded.
    const flushing = this.flushDisplay().then(() => {
      this.displayFlushing = undefined;
      if (this.displayChars > 0) this.kickDisplay();
    });
    this.displayFlushing = flushing;
  }

  /**
   * Sends `text` whole as `text` messages of `kind`, each after its credit,
   * a slice at a time (the engine keeps it as an artifact).
   */
  async sendText(kind: TextKind, text: string): Promise<void> {
    const carry = new StringCarry();
    const max = chunkBytesFor(this.gate.window);
    const step = Math.max(1, Math.floor(max / 3));
    const post1 = async (bytes: Uint8Array) => {
      if (bytes.length === 0) return;
      const wait = this.gate.acquire(bytes.length);
      if (wait) await wait;
      postText(this.callId, kind, bytes);
    };
    for (let i = 0; i < text.length; i += step) {
      // The engine drops a text that arrived short.
      if (this.abort.signal.aborted) return;
      await post1(carry.push(text.slice(i, i + step)));
    }
    await post1(carry.end());
  }

  /** Resolves when pending display text has been posted. */
  async displayDrained(): Promise<void> {
    while (this.displayFlushing) await this.displayFlushing;
  }

  private async flushDisplay(): Promise<void> {
    try {
      while (this.displayChars > 0) {
        const text = (this.displayElided ? DISPLAY_ELIDED : '') + this.displayPieces.join('');
        this.displayPieces = [];
        this.displayChars = 0;
        this.displayElided = false;
        const n = Buffer.byteLength(text);
        const wait = this.gate.acquire(n);
        if (wait) await wait;
        post({ t: 'display', c: this.callId, text, n: Math.min(n, Number.MAX_SAFE_INTEGER) });
      }
    } catch {
      // The call ended while waiting for credit.
    }
  }

  /** The context handed to the tool. */
  context(cwd: string, artifacts: ArtifactReader, sandbox?: SandboxPolicy): ToolContext {
    const run = this;
    return {
      artifacts,
      callId: this.callId,
      signal: this.abort.signal,
      cwd,
      stream: (name?: string) => this.writer(name),
      display: (text: string) => this.display(text),
      get host() {
        return run.host;
      },
      trackProcessGroup: (pid: number) => post({ t: 'proc', c: this.callId, pid }),
      sandbox,
      sandboxed: (file, args, at = cwd) =>
        sandbox ? prepareSandboxed(sandbox, file, args, at) : unconfined(file, args),
    };
  }

  /** Ends every writer and waits until all their bytes are posted. */
  async endWriters(): Promise<void> {
    await Promise.all(
      [...this.writers.values()].map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            if (w.writableFinished) return resolve();
            if (w.destroyed) return reject(w.errored ?? new Error('stream writer destroyed'));
            w.once('finish', () => resolve());
            w.once('error', reject);
            if (!w.writableEnded) w.end();
          }),
      ),
    );
  }
}
