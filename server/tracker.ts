/**
 * The calls a server started, each with its live events numbered for SSE
 * and resume. One pump per call reads the call's own subscription, numbers
 * and renders each frame once, keeps it in a bounded ring and republishes it
 * on a per-call hub; each SSE connection has its own bounded subscription,
 * so a stalled client never slows the pump, let alone the tool. Finished
 * calls are kept within bounds of count, bytes and age.
 */
import type { CallHandle } from '../engine/engine.js';
import { EventHub } from '../engine/events/hub.js';
import type { CallStatus, OutputRef, TerminalResult } from '../engine/result.js';

/** The event names of the SSE stream. */
export type SseEventName = 'started' | 'display' | 'progress' | 'lagged' | 'completed';

/** One numbered event, rendered once as its SSE frame and shared by every connection. */
export interface Frame {
  /** Position in the call's event sequence, from 1; the terminal frame has the largest id. */
  readonly id: number;
  readonly event: SseEventName;
  /** The whole SSE frame: `id:`, `event:`, `data:` lines and the blank line. */
  readonly text: string;
  /** UTF-8 bytes of {@link text}. */
  readonly bytes: number;
}

/** Bounds of the tracker; see {@link ServerOptions} for what they mean and their defaults. */
export interface TrackerLimits {
  /** Frames a connection may have queued before it lags. */
  subscriberQueue: number;
  /** Frames kept per call for resume. */
  bufferEvents: number;
  /** Bytes of frames kept per call for resume. */
  bufferBytes: number;
  /** Finished calls kept. */
  retainCalls: number;
  /** Bytes of finished calls (frames and results) kept. */
  retainBytes: number;
  /** Milliseconds a finished call is kept. */
  retainMs: number;
}

/** Bytes and lines of one stream so far. */
export interface StreamProgress {
  name: string;
  bytes: number;
  lines: number;
}

/** What `GET /v1/calls` and `GET /v1/events` say of one call (CallSummary in the wire schemas). */
export interface CallSummary {
  callId: string;
  tool: string;
  session?: string;
  status: 'running' | CallStatus;
  complete: boolean | null;
  startedAt: string;
  durationMs: number | null;
  streams: StreamProgress[];
  version: number;
}

/** Progress frames a connection may have queued: only the newest matters, so a few are plenty. */
const PROGRESS_QUEUE = 4;

/** An SSE frame; `data` must be one line (JSON.stringify output is). */
export function sseFrame(id: number | undefined, event: SseEventName, data: string): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${data}\n\n`;
}

/** A call started through the server. */
export class TrackedCall {
  readonly callId: string;
  readonly tool: string;
  readonly session: string | undefined;
  readonly handle: CallHandle;
  /** Numbered frames for live subscribers; closed with the terminal frame. */
  readonly hub: EventHub<Frame>;
  /**
   * Progress frames, for the connections that asked for them: unnumbered
   * (no `id:`, so they never move a client's Last-Event-ID), never kept for
   * resume, and in a hub of their own, so they take no room in the queue of
   * a connection that did not ask. Each supersedes the one before; a
   * connection that lags on them just misses some. Closed with the call.
   */
  readonly progressHub: EventHub<string>;
  /** The newest progress frame while the call runs (what a connection asking for progress gets first). */
  latestProgress: string | undefined;
  /** Resolves once the terminal frame exists (the result is final and recorded). */
  readonly done: Promise<void>;
  /** ISO time of the `started` event (or of tracking, until it arrives). */
  startedAt = new Date().toISOString();
  status: CallStatus | undefined;
  finishedAt: number | undefined;
  /** Bytes and lines per stream: the newest progress event's, then the published output's. */
  streams: StreamProgress[] = [];
  /** The tracker's change counter at this call's last change. */
  version = 0;
  private complete: boolean | null = null;
  private durationMs: number | null = null;
  private readonly onChange: (call: TrackedCall) => void;
  private terminalFrame: Frame | undefined;
  /** Where the result's JSON sits inside the terminal frame's text: it is kept once, in the frame. */
  private resultSpan: [number, number] | undefined;
  private ring: Frame[] = [];
  private ringBytes = 0;
  private seq = 0;
  private readonly limits: TrackerLimits;

  constructor(
    handle: CallHandle,
    tool: string,
    session: string | undefined,
    limits: TrackerLimits,
    onEnd: () => void,
    onChange: (call: TrackedCall) => void = () => {},
  ) {
    this.onChange = onChange;
    this.callId = handle.callId;
    this.tool = tool;
    this.session = session;
    this.handle = handle;
    this.limits = limits;
    this.hub = new EventHub<Frame>({ queueLimit: limits.subscriberQueue });
    this.progressHub = new EventHub<string>({ queueLimit: PROGRESS_QUEUE });
    // Subscribed before this constructor returns, so `started` (published a microtask later) is seen.
    const events = handle.events();
    // pump() cannot fail (a subscription never throws, a result never rejects); done must never reject either.
    this.done = this.pump(events).then(onEnd, onEnd);
  }

  /** Id of the newest frame so far (the terminal frame's once ended). */
  get lastId(): number {
    return this.seq;
  }

  /** The terminal frame, once ended. */
  get terminal(): Frame | undefined {
    return this.terminalFrame;
  }

  /** The terminal result as JSON, once ended (a slice of the terminal frame). */
  get resultJson(): string | undefined {
    return this.terminalFrame && this.resultSpan ? this.terminalFrame.text.slice(...this.resultSpan) : undefined;
  }

  /** Bytes this call holds in frames (its result is inside the terminal frame). */
  get retainedBytes(): number {
    return this.ringBytes + (this.terminalFrame?.bytes ?? 0);
  }

  /** The call as `GET /v1/calls` lists it. */
  summary(): CallSummary {
    return {
      callId: this.callId,
      tool: this.tool,
      ...(this.session !== undefined ? { session: this.session } : {}),
      status: this.status ?? 'running',
      complete: this.complete,
      startedAt: this.startedAt,
      durationMs: this.durationMs,
      streams: this.streams,
      version: this.version,
    };
  }

  /** Buffered frames with an id above `id`, oldest first (the terminal frame is not among them). */
  framesAfter(id: number): Frame[] {
    return this.ring.filter((f) => f.id > id);
  }

  private async pump(events: ReturnType<CallHandle['events']>): Promise<void> {
    for await (const ev of events) {
      if (ev.type === 'started') {
        this.startedAt = ev.at;
        this.push('started', JSON.stringify(ev));
      } else if (ev.type === 'display') {
        // Already bounded: the engine cuts display deltas into frames of at most 8192 code units.
        this.push('display', JSON.stringify(ev));
      } else if (ev.type === 'lagged') {
        this.push('lagged', JSON.stringify(ev));
      } else if (ev.type === 'progress') {
        this.latestProgress = sseFrame(undefined, 'progress', JSON.stringify(ev));
        this.progressHub.publish(this.latestProgress);
        this.streams = ev.streams.map((x) => ({ name: x.name, bytes: x.bytes, lines: x.lines }));
        this.onChange(this);
      } else if (ev.type === 'completed') {
        this.finish(ev.result);
        return;
      }
    }
    // Unreachable while the hub keeps its promise of a terminal event; never leave subscribers hanging.
    this.finish(await this.handle.result);
  }

  private frame(event: SseEventName, data: string): Frame {
    const id = ++this.seq;
    const text = sseFrame(id, event, data);
    return { id, event, text, bytes: Buffer.byteLength(text) };
  }

  private push(event: SseEventName, data: string): void {
    const f = this.frame(event, data);
    this.ring.push(f);
    this.ringBytes += f.bytes;
    const { bufferEvents, bufferBytes } = this.limits;
    let drop = 0;
    let bytes = this.ringBytes;
    // The newest frame always stays, even when it alone is over the byte bound.
    while (this.ring.length - drop > 1 && (this.ring.length - drop > bufferEvents || bytes > bufferBytes)) {
      bytes -= (this.ring[drop] as Frame).bytes;
      drop++;
    }
    if (drop > 0) {
      this.ring = this.ring.slice(drop);
      this.ringBytes = bytes;
    }
    this.hub.publish(f);
  }

  private finish(result: TerminalResult): void {
    if (this.terminalFrame) return;
    this.status = result.status;
    this.complete = result.complete;
    this.durationMs = result.durationMs;
    this.streams = outputStreams(result.output);
    const head = `{"type":"completed","callId":${JSON.stringify(this.callId)},"result":`;
    const data = `${head}${JSON.stringify(result)}}`;
    this.terminalFrame = this.frame('completed', data);
    const start = this.terminalFrame.text.indexOf(head) + head.length;
    // The frame ends with the data, its closing brace, then the blank line.
    this.resultSpan = [start, this.terminalFrame.text.length - 3];
    this.finishedAt = Date.now();
    this.latestProgress = undefined;
    this.progressHub.end();
    this.hub.close(this.terminalFrame);
    this.onChange(this);
  }
}

/** Bytes and lines per stream of a published output (`single` or `page` for the other kinds). */
function outputStreams(o: OutputRef | null): StreamProgress[] {
  if (!o) return [];
  if (o.kind === 'streams') return o.streams.map((x) => ({ name: x.name, bytes: x.bytes, lines: x.lines }));
  return [{ name: o.kind, bytes: o.bytes, lines: o.lines }];
}

/** The calls of one server: running ones, and finished ones within the retention bounds. */
export class CallTracker {
  private readonly calls = new Map<string, TrackedCall>();
  /** Finished calls, oldest first. */
  private readonly finished = new Map<string, TrackedCall>();
  private finishedBytes = 0;
  private readonly limits: TrackerLimits;
  /** Counts changes of every call: a summary's `version`. */
  private changes = 0;
  /**
   * Every call's new summary as it changes (started, progress, ended), for
   * `GET /v1/events`; each connection has its own bounded queue and lags
   * rather than slowing anyone.
   */
  readonly summaries: EventHub<CallSummary>;

  constructor(limits: TrackerLimits) {
    this.limits = limits;
    this.summaries = new EventHub<CallSummary>({ queueLimit: limits.subscriberQueue });
  }

  /** The change counter now. */
  get version(): number {
    return this.changes;
  }

  /** Starts following a call the server just started. */
  track(handle: CallHandle, tool: string, session: string | undefined): TrackedCall {
    const call: TrackedCall = new TrackedCall(
      handle,
      tool,
      session,
      this.limits,
      () => this.ended(call),
      (c) => this.changed(c),
    );
    this.calls.set(call.callId, call);
    this.changed(call);
    return call;
  }

  /** Summaries of the running and retained calls, oldest first. */
  list(): CallSummary[] {
    this.evict();
    return [...this.calls.values()].map((c) => c.summary());
  }

  /** Ends the summaries stream (shutdown): its connections finish. */
  endSummaries(): void {
    this.summaries.end();
  }

  private changed(call: TrackedCall): void {
    call.version = ++this.changes;
    if (!this.summaries.closed) this.summaries.publish(call.summary());
  }

  /** The call `id`, running or still retained. */
  get(id: string): TrackedCall | undefined {
    this.evict();
    return this.calls.get(id);
  }

  /** Calls that have not ended. */
  running(): TrackedCall[] {
    return [...this.calls.values()].filter((c) => c.finishedAt === undefined);
  }

  /** Number of calls that have not ended. */
  get active(): number {
    return this.calls.size - this.finished.size;
  }

  private ended(call: TrackedCall): void {
    this.finished.set(call.callId, call);
    this.finishedBytes += call.retainedBytes;
    this.evict();
  }

  private evict(): void {
    const { retainCalls, retainBytes, retainMs } = this.limits;
    const now = Date.now();
    for (const [id, c] of this.finished) {
      const expired = now - (c.finishedAt ?? now) > retainMs;
      if (!expired && this.finished.size <= retainCalls && this.finishedBytes <= retainBytes) break;
      this.finished.delete(id);
      this.calls.delete(id);
      this.finishedBytes -= c.retainedBytes;
    }
  }
}
