/**
 * One call inside a worker: the tool context (stream writers, display, host
 * services, abort signal) and the bookkeeping the runtime needs to finalise
 * the call (which streams were written, whether a rule was broken).
 */
import { Writable } from 'node:stream';
import { UndeclaredStreamError } from '../engine/protocol/errors.js';
import { MAX_CHUNK_BYTES } from '../engine/protocol/limits.js';
import { CallEndpoint, Comlink, installErrorTransfer } from '../engine/protocol/rpc.js';
import { channelNames, type OutputDeclaration } from '../engine/protocol/streams.js';
import { post, postChunk } from './channel.js';
import { CreditGate } from './credit.js';
import type { ArtifactReader, HostServices, ToolContext } from './tool.js';
import { takeHandedOver } from './transfer.js';
import { codePointCut, StringCarry, Utf8Carry } from './utf8.js';

/** Pending display text is capped at this many characters (oldest part elided). */
const DISPLAY_PENDING_MAX = 64 * 1024;

/**
 * Largest message a channel sends: a quarter of the credit window, so several
 * are in flight at once and a message never needs more credit than the window
 * holds, within the protocol's bound.
 */
function chunkBytesFor(window: number): number {
  // At least one code point, so a split always makes progress.
  return Math.max(4, Math.min(MAX_CHUNK_BYTES, Math.floor(window / 4)));
}

/** The writer of one output channel. */
class ChannelWriter extends Writable {
  private readonly run: CallRun;
  private readonly index: number;
  private readonly bytesCarry = new Utf8Carry();
  private readonly textCarry = new StringCarry();
  private readonly chunkBytes: number;
  /** Bytes sent so far. */
  sent = 0;

  constructor(run: CallRun, index: number) {
    const chunkBytes = chunkBytesFor(run.gate.window);
    // decodeStrings: false keeps strings as strings, so we encode once.
    super({ decodeStrings: false, highWaterMark: chunkBytes });
    this.run = run;
    this.index = index;
    this.chunkBytes = chunkBytes;
  }

  override _write(chunk: unknown, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    const b = this.toUtf8(chunk);
    if (b instanceof Error) {
      cb(b);
      return;
    }
    this.send(b.bytes, b.owned).then(() => cb(), cb);
  }

  /**
   * Writes that arrive while a chunk is on its way are buffered by the stream
   * and handed over together: they leave as one message of up to a quarter
   * of the window (at most 256 KiB)
   * instead of one per write (a pipe yields reads of a few KiB; each message
   * costs the engine a dispatch, a hash update and a credit).
   */
  override _writev(
    chunks: Array<{ chunk: unknown; encoding: BufferEncoding }>,
    cb: (err?: Error | null) => void,
  ): void {
    const parts: Array<{ bytes: Uint8Array; owned: boolean }> = [];
    for (const { chunk } of chunks) {
      const b = this.toUtf8(chunk);
      if (b instanceof Error) {
        cb(b);
        return;
      }
      parts.push(b);
    }
    this.sendGathered(parts).then(() => cb(), cb);
  }

  /**
   * Sends queued writes as few messages as possible, copying each byte at
   * most once: small parts are copied together into buffers of at most one
   * message (each its own allocation, so it is transferred, not copied again);
   * a part big enough to be a message of its own goes as it is (moved when the
   * runtime owns it).
   */
  private async sendGathered(parts: ReadonlyArray<{ bytes: Uint8Array; owned: boolean }>): Promise<void> {
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
    for (const p of parts) {
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

  /** Valid UTF-8 bytes for a write, and whether the runtime owns them (so they may be transferred). */
  private toUtf8(chunk: unknown): { bytes: Uint8Array; owned: boolean } | Error {
    if (typeof chunk === 'string') {
      const flushed = this.bytesCarry.end();
      const bytes = this.textCarry.push(chunk);
      return { bytes: flushed.length > 0 ? Buffer.concat([flushed, bytes]) : bytes, owned: true };
    }
    if (chunk instanceof Uint8Array) {
      const flushed = this.textCarry.end();
      const valid = this.bytesCarry.push(chunk);
      if (flushed.length > 0) return { bytes: Buffer.concat([flushed, valid]), owned: true };
      // A view into the tool's own buffer (an incomplete character held back) is still the tool's,
      // unless the tool handed the buffer over (workers/transfer.ts).
      return { bytes: valid, owned: valid.buffer !== chunk.buffer || takeHandedOver(chunk) };
    }
    return new TypeError('stream writers accept strings and Uint8Arrays');
  }

  override _final(cb: (err?: Error | null) => void): void {
    const tail = Buffer.concat([this.textCarry.end(), this.bytesCarry.end()]);
    this.send(tail, true).then(() => cb(), cb);
  }

  private async send(bytes: Uint8Array, owned: boolean): Promise<void> {
    let off = 0;
    while (off < bytes.length) {
      const rest = bytes.subarray(off);
      const cut = codePointCut(rest, this.chunkBytes);
      const piece = rest.subarray(0, cut);
      const wait = this.run.gate.acquire(piece.length);
      if (wait) await wait;
      postChunk(this.run.callId, this.index, piece, owned && cut === bytes.length && off === 0);
      this.sent += piece.length;
      off += cut;
    }
  }
}

/** State of one call in this worker. */
export class CallRun {
  readonly callId: string;
  readonly gate: CreditGate;
  readonly abort = new AbortController();
  readonly writers = new Map<string, ChannelWriter>();
  readonly names: readonly string[];
  /** The first contract violation (undeclared stream), which fails the call whatever the tool does. */
  violation: Error | undefined;
  private readonly endpoint: CallEndpoint;
  private hostProxy: HostServices | undefined;
  private displayPending = '';
  private displayFlushing: Promise<void> | undefined;

  constructor(callId: string, window: number, output: OutputDeclaration) {
    this.callId = callId;
    this.gate = new CreditGate(window);
    this.names = channelNames(output);
    installErrorTransfer();
    this.endpoint = new CallEndpoint((m) => post({ t: 'rpc', c: callId, m }));
  }

  /** Host services, through comlink; the proxy is made on first use (most calls never need one). */
  get host(): HostServices {
    this.hostProxy ??= Comlink.wrap<HostServices>(this.endpoint.asComlink()) as unknown as HostServices;
    return this.hostProxy;
  }

  /** Delivers an rpc message from the engine. */
  deliverRpc(m: unknown): void {
    this.endpoint.deliver(m);
  }

  /** The writer for `name` (the single output when omitted). */
  writer(name?: string): ChannelWriter {
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
    const w = new ChannelWriter(this, index);
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
    this.displayPending += text;
    if (this.displayPending.length > DISPLAY_PENDING_MAX) {
      let cut = this.displayPending.length - DISPLAY_PENDING_MAX;
      const c = this.displayPending.charCodeAt(cut);
      if (c >= 0xdc00 && c <= 0xdfff) cut++; // don't start on a low surrogate
      this.displayPending = `[… display elided]\n${this.displayPending.slice(cut)}`;
    }
    this.kickDisplay();
  }

  private kickDisplay(): void {
    if (this.displayFlushing) return;
    // Cleared only after the flush settles (it may finish synchronously); text appended in the
    // meantime, e.g. by a tool calling display() in a synchronous loop, starts another flush then
    // instead of being stranded.
    const flushing = this.flushDisplay().then(() => {
      this.displayFlushing = undefined;
      if (this.displayPending.length > 0) this.kickDisplay();
    });
    this.displayFlushing = flushing;
  }

  /** Resolves when pending display text has been posted. */
  async displayDrained(): Promise<void> {
    while (this.displayFlushing) await this.displayFlushing;
  }

  private async flushDisplay(): Promise<void> {
    try {
      while (this.displayPending.length > 0) {
        const text = this.displayPending;
        this.displayPending = '';
        const n = Buffer.byteLength(text);
        const wait = this.gate.acquire(n);
        if (wait) await wait;
        post({ t: 'display', c: this.callId, text, n: Math.min(n, Number.MAX_SAFE_INTEGER) });
      }
    } catch {
      // The call ended while display waited for credit: nothing left to show it to.
    }
  }

  /** The context handed to the tool. */
  context(cwd: string, artifacts: ArtifactReader): ToolContext {
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
