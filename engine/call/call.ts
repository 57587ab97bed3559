/**
 * One call, main side: routes the worker's messages into the capture
 * coordinator, returns credit as bytes reach disk, keeps the bounded live
 * display, answers host-service calls, enforces cancellation and the grace
 * period, and finalises exactly once: publish, pin, record, release, report.
 */
import { randomUUID } from 'node:crypto';
import type { MessagePort } from 'node:worker_threads';
import type { Pin, Store } from '../../store/store.js';
import { EventHub } from '../events/hub.js';
import { MODEL_STATUS_RESERVE } from '../options.js';
import type { WorkerPool } from '../pool/pool.js';
import { formatBytes, formatDuration, incompleteDisplay, LiveDisplay } from '../presentation/display.js';
import { assertModelViewWithinBound, previewBudget, renderModelView } from '../presentation/model-view.js';
import type { ToolOutputOptions } from '../presentation/options.js';
import { renderPageView } from '../presentation/page-view.js';
import { isToolProcessGroup, killProcessGroup } from '../processes/process-group.js';
import type { ProcessGuard } from '../processes/process-guard.js';
import {
  BadArgumentsError,
  CancelledError,
  DeniedError,
  deserializeError,
  makeError,
  ProtocolError,
  ResourceLimitError,
  type SerializedError,
  type SluiceError,
  serializeError,
  TimeoutError,
  toSluiceError,
  WorkerCrashError,
} from '../protocol/errors.js';
import { COMPLETION_BOUNDS, MAX_TIMER_MS } from '../protocol/limits.js';
import type { PreparedOperation, TextKind, WireCompletion, WorkerMessage } from '../protocol/messages.js';
import { wireCompletionSchema } from '../protocol/messages.js';
import { CallEndpoint, Comlink, installErrorTransfer } from '../protocol/rpc.js';
import { cutMarker, cutMarkerBytes, detachString, utf8PrefixEnd } from '../protocol/text.js';
import type { ToolInfo } from '../registry.js';
import type { CallEvent, CallStatus, FullTextRefs, OutputRef, TerminalResult, TextRef } from '../result.js';
import { callerAbortError } from './abort-reason.js';
import { Capture } from './capture.js';
import { freeChunk } from './free-buffer.js';
import { FullTexts } from './full-text.js';
import { PageCapture } from './page-capture.js';

/** Decides whether a prepared operation may run. Return false (or throw) to deny. */
export type ApprovalPolicy = (
  op: PreparedOperation,
  call: { tool: string; callId: string; session?: string },
) => boolean | Promise<boolean>;

/** Where call records go (the session event log implements it). */
export interface CallRecorder {
  /** A call started. */
  started(info: { callId: string; tool: ToolInfo; args: unknown; session?: string; at: string }): Promise<void>;
  /**
   * A call ended; must be durable when the promise resolves (the publication
   * pin is released after). When it rejects, it is called once more with the
   * failed result the caller then gets (status `failed`, the recording error).
   */
  completed(result: TerminalResult): Promise<void>;
}

/** Engine settings a call needs. */
export interface CallSettings {
  toolOutput: ToolOutputOptions;
  window: number;
  graceMs: number;
  maxStreamBytes: number;
  liveDisplayBytes: number;
  subscriberQueue: number;
  cwd: string;
}

/** Options of one call. */
export interface CallOptions {
  /** Record the call in this session's event log (`[A-Za-z0-9._-]`, 1 to 128 characters); EBADARGS otherwise. */
  session?: string;
  /**
   * Aborting it cancels the call (as {@link CallHandle.cancel} does), keeping
   * the reason: `abort(new Error('user abort'))` ends it cancelled with
   * "cancelled by the caller: user abort"; a signal that timed out
   * (`AbortSignal.timeout(ms)`) fails it with ETIMEOUT, as `timeoutMs` would.
   */
  signal?: AbortSignal;
  /**
   * Fails the call with ETIMEOUT after this many milliseconds, counted from
   * the call's start: time spent waiting for a free worker (and, for the first
   * call of a fresh engine, for a worker to boot) counts. Above 0 and at most
   * 2^31-1 (about 24.8 days, the longest a timer waits); anything else is
   * EBADARGS, synchronously from `Engine.call`.
   */
  timeoutMs?: number;
  /** The call's id. @default a random UUID */
  callId?: string;
}

/** Options the engine itself sets on a call. */
export interface InternalCallOptions {
  /** Keep a self-paginating tool's page bytes after the call ends ({@link Call.pageBytes}), for a raw read. */
  keepPage?: boolean;
}

/** Everything a call needs from its engine. */
export interface CallDeps {
  pool: WorkerPool;
  /** Where the call's process groups are tracked outside the engine (its watchdog). */
  processes?: ProcessGuard;
  store: Store;
  settings: CallSettings;
  approve: ApprovalPolicy;
  recorder?: CallRecorder;
  engineHub: EventHub<CallEvent>;
  onSettled(call: Call): void;
}

/** How long a completion may trail its task's result (they travel on different ports). */
const LATE_COMPLETION_MS = 2000;
/** How long messages a dead worker posted may trail its death. */
const LATE_MESSAGES_MS = 50;

type Outcome =
  | { kind: 'done'; completion: WireCompletion }
  | { kind: 'fail'; error: SerializedError; cancelled: boolean }
  | { kind: 'crash'; error: unknown };

/** UTF-8 bytes of the status line's detail: the line, with its wrapper, stays inside MODEL_STATUS_RESERVE. */
const STATUS_DETAIL_MAX_BYTES = 700;

/** A running call. */
export class Call {
  readonly callId: string;
  readonly tool: ToolInfo;
  readonly session: string | undefined;
  readonly hub: EventHub<CallEvent>;
  /** Settles with the terminal result; never rejects. */
  readonly result: Promise<TerminalResult>;
  /** Largest number of bytes in flight (received, not yet on disk) seen; for tests of backpressure. */
  maxInFlight = 0;
  /** A self-paginating tool's page as it produced it, when the call was made with `keepPage`. */
  pageBytes: Buffer | undefined;

  private readonly deps: CallDeps;
  private readonly args: unknown;
  private readonly startedAt = Date.now();
  private readonly capture: Capture | PageCapture;
  /** Whole texts of fields the worker cut to their bounds, and the sizes it announced for them. */
  private readonly texts: FullTexts;
  private textSizes: Partial<Record<TextKind, number>> = {};
  private readonly live: LiveDisplay;
  private readonly piscinaAbort = new AbortController();
  private readonly pgids = new Set<number>();
  private readonly endpoint: CallEndpoint;
  private port: MessagePort | undefined;
  private exposed = false;
  private inFlight = 0;
  private creditDue = 0;
  private ended = false;
  private cancelRequested: SluiceError | undefined;
  private failure: SluiceError | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private settleTimer: NodeJS.Timeout | undefined;
  private resolve!: (r: TerminalResult) => void;
  private readonly unlinkSignal: (() => void) | undefined;
  private readonly keepPage: boolean;

  constructor(deps: CallDeps, tool: ToolInfo, args: unknown, options: CallOptions, internal: InternalCallOptions = {}) {
    assertTimeout(options.timeoutMs);
    this.deps = deps;
    this.keepPage = internal.keepPage === true;
    this.tool = tool;
    this.args = args;
    this.session = options.session;
    this.callId = options.callId ?? randomUUID();
    this.hub = new EventHub<CallEvent>({ queueLimit: deps.settings.subscriberQueue });
    this.live = new LiveDisplay(deps.settings.liveDisplayBytes);
    this.result = new Promise((r) => {
      this.resolve = r;
    });
    const s = deps.settings;
    if (tool.selfPaginating) {
      this.capture = new PageCapture();
    } else {
      const reserve = { ...s.toolOutput, maxModelBytes: s.toolOutput.maxModelBytes - MODEL_STATUS_RESERVE };
      const limits = previewBudget(tool.output, reserve);
      this.capture = new Capture(deps.store, tool.output, { ...limits, maxStreamBytes: s.maxStreamBytes });
    }
    this.texts = new FullTexts(deps.store, { maxBytes: s.maxStreamBytes });
    installErrorTransfer();
    this.endpoint = new CallEndpoint((m) => {
      if (this.port) this.deps.pool.send(this.port, { t: 'rpc', c: this.callId, m });
    });
    if (options.signal) {
      // The caller's reason is kept; a timed-out signal fails the call with ETIMEOUT (abort-reason.ts).
      const onAbort = () => {
        const err = callerAbortError(options.signal?.reason);
        if (err.code === 'ETIMEOUT') this.failWith(err);
        else this.requestStop(err);
      };
      if (options.signal.aborted) queueMicrotask(onAbort);
      else options.signal.addEventListener('abort', onAbort, { once: true });
      this.unlinkSignal = () => options.signal?.removeEventListener('abort', onAbort);
    }
    if (options.timeoutMs !== undefined) {
      this.timeoutTimer = setTimeout(() => {
        this.failWith(new TimeoutError(`${tool.name} ran longer than ${options.timeoutMs} ms`));
      }, options.timeoutMs);
    }
  }

  /** Starts the call (records it, then hands it to the pool). */
  async start(): Promise<void> {
    // Let the caller subscribe to events before the first one is published.
    await Promise.resolve();
    const at = new Date(this.startedAt).toISOString();
    const started: CallEvent = { type: 'started', callId: this.callId, tool: this.tool.name, at };
    if (this.session !== undefined) started.session = this.session;
    this.hub.publish(started);
    this.deps.engineHub.publish(started);
    try {
      await this.deps.recorder?.started({
        callId: this.callId,
        tool: this.tool,
        args: this.args,
        at,
        ...(this.session !== undefined ? { session: this.session } : {}),
      });
    } catch (err) {
      await this.finish({ kind: 'crash', error: toSluiceError(err, 'EDISK') }, toSluiceError(err, 'EDISK'));
      return;
    }
    const task = {
      kind: 'call' as const,
      module: this.tool.module,
      callId: this.callId,
      args: this.args,
      window: this.deps.settings.window,
      cwd: this.deps.settings.cwd,
      storeDir: this.deps.store.root,
      displayBytes: this.deps.settings.liveDisplayBytes,
    };
    this.deps.pool.run(task, { signal: this.piscinaAbort.signal, callId: this.callId, sink: this }).then(
      () => {
        // The task returned; its done/fail message was posted before, on another port, and the
        // two ports are not ordered: give it time to land before calling it a protocol breach.
        if (this.ended) return;
        this.settleTimer = setTimeout(() => {
          void this.finish({ kind: 'crash', error: new ProtocolError('the worker finished without a completion') });
        }, LATE_COMPLETION_MS);
      },
      (err: unknown) => {
        // Messages the worker posted before it died (or retired) are still queued on its port.
        if (this.ended) return;
        this.settleTimer = setTimeout(() => void this.finish({ kind: 'crash', error: err }), LATE_MESSAGES_MS);
      },
    );
  }

  /** Asks the tool to stop; its worker is terminated if it has not ended after the grace period. */
  cancel(reason = 'cancelled'): void {
    this.requestStop(new CancelledError(reason));
  }

  private failWith(err: SluiceError): void {
    this.failure ??= err;
    this.requestStop(err);
  }

  private requestStop(err: SluiceError): void {
    if (this.ended || this.cancelRequested) return;
    this.cancelRequested = err;
    if (!this.port) {
      // Not started in a worker yet: nothing to be graceful with.
      this.piscinaAbort.abort(err);
      return;
    }
    this.deps.pool.send(this.port, { t: 'abort', c: this.callId, reason: err.message });
    this.graceTimer = setTimeout(() => this.piscinaAbort.abort(err), this.deps.settings.graceMs);
  }

  /** Handles one message of this call from its worker. @internal */
  onMessage(m: WorkerMessage, port: MessagePort): void {
    if (this.ended) return;
    switch (m.t) {
      case 'start':
        this.port = port;
        if (JSON.stringify(m.output) !== JSON.stringify(this.tool.output)) {
          this.failWith(
            new ProtocolError(`${this.tool.name}: the worker's output declaration differs from the registered one`),
          );
        }
        if (this.cancelRequested) {
          port.postMessage({ t: 'abort', c: this.callId, reason: this.cancelRequested.message });
          this.graceTimer ??= setTimeout(
            () => this.piscinaAbort.abort(this.cancelRequested),
            this.deps.settings.graceMs,
          );
        }
        return;
      case 'chunk':
        this.onChunk(m.s, m.b);
        return;
      case 'display': {
        this.live.append(m.text);
        // Subscriber queues are bounded in events; bounded events make them bounded in bytes.
        for (const text of displayFrames(m.text)) {
          const ev: CallEvent = { type: 'display', callId: this.callId, text };
          this.hub.publish(ev);
          this.deps.engineHub.publish(ev);
        }
        this.credit(Math.min(m.n, this.deps.settings.window));
        return;
      }
      case 'proc':
        if (isToolProcessGroup(m.pid) && !this.pgids.has(m.pid)) {
          this.pgids.add(m.pid);
          this.deps.processes?.track(m.pid);
        }
        return;
      case 'rpc':
        // Host services are exposed on first use: most calls never ask for them.
        if (!this.exposed) {
          this.exposed = true;
          Comlink.expose(this.hostServices(), this.endpoint.asComlink());
        }
        this.endpoint.deliver(m.m);
        return;
      case 'text':
        this.onText(m.k, m.b);
        return;
      case 'done': {
        const parsed = wireCompletionSchema.safeParse(m.completion);
        if (!parsed.success) {
          void this.finish({
            kind: 'fail',
            error: serializeError(new ProtocolError(`invalid completion: ${parsed.error.message}`)),
            cancelled: false,
          });
          return;
        }
        const oversized = oversizedCompletion(parsed.data);
        if (oversized) {
          void this.finish({ kind: 'fail', error: serializeError(oversized), cancelled: false });
          return;
        }
        const completion = parsed.data;
        if (completion.error) completion.error = boundArrivedError(completion.error as SerializedError);
        this.textSizes = { ...completion.cut };
        if (completion.display !== undefined)
          completion.display = clipDisplay(completion.display, this.deps.settings.liveDisplayBytes);
        void this.finish({ kind: 'done', completion });
        return;
      }
      case 'fail':
        if (m.cut !== undefined) this.textSizes = { error: m.cut };
        void this.finish({ kind: 'fail', error: boundArrivedError(m.error), cancelled: m.cancelled === true });
        return;
    }
  }

  private onChunk(index: number, bytes: Uint8Array): void {
    if (!(bytes instanceof Uint8Array)) {
      this.failWith(new ProtocolError('a chunk without bytes'));
      return;
    }
    const len = bytes.length;
    if (this.failure) {
      // The call has failed: the chunk is dropped, but its credit goes back, so a writer blocked on
      // credit wakes up, sees the abort and lets the tool end by itself instead of waiting out graceMs.
      this.credit(len);
      return;
    }
    let written: Promise<void>;
    try {
      written = this.capture.accept(index, bytes);
    } catch (err) {
      this.failWith(toSluiceError(err, 'EPROTOCOL'));
      this.credit(len);
      return;
    }
    this.inFlight += len;
    if (this.inFlight > this.maxInFlight) this.maxInFlight = this.inFlight;
    written.then(
      () => {
        this.inFlight -= len;
        this.credit(len);
        // Written (and hashed, scanned, previewed) and not kept by the capture: free the memory now.
        if (!this.capture.keepsChunks) freeChunk(bytes);
      },
      (err: unknown) => {
        this.inFlight -= len;
        this.failWith(toSluiceError(err, 'EDISK'));
        // Not on disk and never will be, but no longer in flight either (see the dropped-chunk case above).
        this.credit(len);
      },
    );
  }

  /** Part of a whole text (a cut error message or display): written like a chunk, its credit back once on disk. */
  private onText(kind: TextKind, bytes: Uint8Array): void {
    if (!(bytes instanceof Uint8Array) || (kind !== 'error' && kind !== 'display')) {
      this.failWith(new ProtocolError('a text message without bytes or of an unknown kind'));
      return;
    }
    const len = bytes.length;
    if (this.cancelRequested || this.failure) {
      // Stopping: the text will not be kept, but its credit goes back so the sender is not stuck.
      this.credit(len);
      return;
    }
    let written: Promise<void>;
    try {
      written = this.texts.accept(kind, bytes);
    } catch (err) {
      this.failWith(toSluiceError(err, 'EPROTOCOL'));
      this.credit(len);
      return;
    }
    // A failed write only loses the extra: the announced size no longer matches, so it is not published.
    written.then(
      () => this.credit(len),
      () => this.credit(len),
    );
  }

  /**
   * Returns credit. Chunks written by one writev settle together: their credit
   * goes back as one message at the end of the microtask queue, not one each.
   */
  private credit(n: number): void {
    if (n <= 0) return;
    this.creditDue += n;
    if (this.creditDue === n) queueMicrotask(() => this.sendCredit());
  }

  private sendCredit(): void {
    const n = this.creditDue;
    this.creditDue = 0;
    if (this.port && !this.ended && n > 0) this.deps.pool.send(this.port, { t: 'credit', c: this.callId, n });
  }

  private hostServices() {
    return {
      approve: async (op: PreparedOperation): Promise<void> => {
        const info = {
          tool: this.tool.name,
          callId: this.callId,
          ...(this.session !== undefined ? { session: this.session } : {}),
        };
        let ok: boolean;
        try {
          ok = await this.deps.approve(op, info);
        } catch (err) {
          throw new DeniedError(`${op.kind} denied: ${(err as Error)?.message ?? String(err)}`, { op: op.kind });
        }
        if (ok !== true) throw new DeniedError(`${op.kind} denied by the host's approval policy`, { op: op.kind });
      },
    };
  }

  private async finish(outcome: Outcome, preset?: SluiceError): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.graceTimer);
    clearTimeout(this.timeoutTimer);
    clearTimeout(this.settleTimer);
    this.unlinkSignal?.();
    this.deps.pool.detach(this.callId);
    this.killProcessGroups();

    let status: CallStatus;
    let error: SluiceError | undefined = preset ?? this.failure;
    /** True when `error` is the one the tool finalised itself (its display and metadata stand). */
    let toolsOwnError = false;
    /** The error as the tool (or its worker) reported it: the one a cut message belongs to. */
    let reportedError: SluiceError | undefined;
    let completion: WireCompletion | undefined;
    if (outcome.kind === 'done') {
      completion = outcome.completion;
      if (error) status = 'failed';
      else if (this.cancelRequested) {
        status = 'cancelled';
        error = this.cancelRequested;
      } else if (completion.error) {
        status = 'failed';
        error = deserializeError(completion.error as SerializedError);
        reportedError = error;
        toolsOwnError = true;
      } else status = completion.status ?? 'success';
    } else if (outcome.kind === 'fail') {
      // The worker's serialised form, details included (toSluiceError would keep only code and message).
      const reported = deserializeError(outcome.error);
      reportedError = reported;
      if (error) status = 'failed';
      else if (outcome.cancelled || this.cancelRequested) {
        status = 'cancelled';
        error = this.cancelRequested ?? reported;
      } else {
        status = 'failed';
        error = reported;
      }
    } else if (error) {
      status = 'failed';
    } else if (this.cancelRequested) {
      status = 'cancelled';
      error = this.cancelRequested;
    } else {
      status = 'failed';
      const cause = outcome.error as { message?: string; code?: string };
      error = new WorkerCrashError(`the worker running ${this.tool.name} died: ${cause?.message ?? String(cause)}`, {
        cause: cause?.code ?? null,
      });
    }
    if (error?.code === 'ETIMEOUT' || error?.code === 'ESIZELIMIT') status = 'failed';
    let complete = outcome.kind === 'done' && !error;

    // Publish what was accepted.
    let output: OutputRef | null = null;
    let model = '';
    let pin: Pin | undefined;
    try {
      if (this.capture instanceof PageCapture) {
        const page = this.capture.text();
        output = { kind: 'page', bytes: page.bytes, lines: page.lines };
        // The continuation line comes from the tool's metadata; output.bytes stays the page alone.
        model = renderPageView(page.text, status === 'success' ? completion?.metadata : undefined);
      } else if (outcome.kind !== 'done' && this.capture.stats().every((c) => c.bytes === 0)) {
        // The tool ended abnormally before producing anything (bad arguments, denied, crashed
        // early): there is nothing to retain, so no empty artifacts are published.
        await this.capture.discard();
      } else {
        const writeError = this.capture.writeError;
        if (writeError !== undefined) throw writeError;
        pin = await this.deps.store.pin();
        const captured = await this.capture.publish(pin);
        output = captured.ref;
        model = renderModelView(captured.view);
      }
    } catch (err) {
      if (this.capture instanceof Capture) await this.capture.discard();
      await pin?.release();
      pin = undefined;
      error = toSluiceError(err, 'EDISK');
      toolsOwnError = false;
      status = 'failed';
      complete = false;
      output = null;
      model = '';
    }
    // Texts the worker cut to their bounds are kept whole only when the result shows them.
    const showsToolDisplay = completion?.display !== undefined && status !== 'cancelled' && (!error || toolsOwnError);
    const kept = await this.keepFullTexts(pin, {
      ...(error !== undefined && error === reportedError ? { error: this.textSizes.error } : {}),
      ...(showsToolDisplay ? { display: this.textSizes.display } : {}),
    });
    pin = kept.pin;
    const fullText = kept.refs;
    if (error !== undefined && error === reportedError) {
      error = withCutMarker(error, this.textSizes.error, fullText.error);
      if (toolsOwnError) reportedError = error;
    }
    if (completion && showsToolDisplay) {
      completion.display = textWithCutMarker(completion.display as string, this.textSizes.display, fullText.display);
    }
    model = this.withStatusLine(model, status, complete, error, completion, fullText.error);
    try {
      // A page is bounded by its tool and PageCapture, never by toolOutput: configuration cannot cut or fail it.
      if (!(this.capture instanceof PageCapture)) {
        assertModelViewWithinBound(model, this.deps.settings.toolOutput.maxModelBytes);
      }
    } catch (err) {
      // Cannot happen with the reserve the status line has; if it ever does, the view is replaced
      // by the status line alone (never cut), and a success becomes a failure that says why.
      if (status === 'success') {
        status = 'failed';
        error = toSluiceError(err);
        toolsOwnError = false;
      }
      complete = false;
      model = this.withStatusLine('', status, complete, error, completion, undefined);
    }

    const durationMs = Date.now() - this.startedAt;
    const result: TerminalResult = {
      callId: this.callId,
      tool: this.tool.name,
      status,
      complete,
      display: this.finalDisplay(status, completion, error, durationMs, toolsOwnError, output),
      model,
      output,
      metadata: completion?.metadata ?? {},
      attachments: status === 'success' || status === 'failed' ? (completion?.attachments ?? []) : [],
      messages: completion?.messages ?? [],
      startedAt: new Date(this.startedAt).toISOString(),
      durationMs,
    };
    if (this.session !== undefined) result.session = this.session;
    if (error) result.error = serializeError(error);
    if (fullText.error || fullText.display) result.fullText = fullText;
    if (this.capture instanceof PageCapture) {
      if (this.keepPage && status === 'success') this.pageBytes = this.capture.bytes();
      this.capture.discard();
    }

    try {
      await this.deps.recorder?.completed(result);
    } catch (err) {
      // Not recorded (or not durably): the call fails, and its model view and display say why.
      const e = toSluiceError(err, 'EDISK');
      result.status = 'failed';
      result.complete = false;
      result.error = serializeError(e);
      result.model = this.withStatusLine(result.model, 'failed', false, e, undefined, undefined);
      result.display = this.finalDisplay('failed', completion, e, result.durationMs, false, result.output);
      // Once more, with the failure the caller gets: a write that failed part-way left at most a torn
      // line, which replay skips, and would otherwise show this call as interrupted.
      await this.deps.recorder?.completed(result).catch(() => {});
    } finally {
      // Terminal references are durable (or recording failed): the publication protection can go.
      await pin?.release();
    }
    const ev: CallEvent = { type: 'completed', callId: this.callId, result };
    this.hub.close(ev);
    this.deps.engineHub.publish(ev);
    this.deps.onSettled(this);
    this.resolve(result);
  }

  /**
   * Publishes the whole texts the worker sent for the fields in `shown`
   * (their announced sizes), under the output's pin or a new one; the rest
   * are dropped. Never fails the call: a whole text is an extra.
   */
  private async keepFullTexts(
    pin: Pin | undefined,
    shown: Partial<Record<TextKind, number | undefined>>,
  ): Promise<{ refs: FullTextRefs; pin: Pin | undefined }> {
    const expected: Partial<Record<TextKind, number>> = {};
    for (const [k, v] of Object.entries(shown)) if (v !== undefined) expected[k as TextKind] = v;
    if (!this.texts.any) return { refs: {}, pin };
    if (Object.keys(expected).length === 0) {
      await this.texts.discard();
      return { refs: {}, pin };
    }
    let held = pin;
    try {
      held ??= await this.deps.store.pin();
    } catch {
      await this.texts.discard();
      return { refs: {}, pin };
    }
    return { refs: await this.texts.publish(held, expected), pin: held };
  }

  private withStatusLine(
    model: string,
    status: CallStatus,
    complete: boolean,
    error: SluiceError | undefined,
    completion: WireCompletion | undefined,
    wholeError: TextRef | undefined,
  ): string {
    if (status === 'success') return model;
    const raw = error ? `${error.code}: ${error.message}` : (completion?.note ?? 'the tool reported failure');
    // The whole error's address survives the clipping: it comes after the clipped detail.
    const whole = wholeError ? ` The whole error: read(filePath="artifact://${wholeError.digest}")` : '';
    const detail = clipUtf8(raw.replace(/\s+/g, ' '), STATUS_DETAIL_MAX_BYTES - Buffer.byteLength(whole)) + whole;
    const incomplete = complete ? '' : ' Output is incomplete.';
    const line = `[Status: ${status}. ${detail}.${incomplete}]`;
    if (model.length === 0) return line;
    return model.endsWith('\n') ? `${model}\n${line}` : `${model}\n\n${line}`;
  }

  private finalDisplay(
    status: CallStatus,
    completion: WireCompletion | undefined,
    error: SluiceError | undefined,
    durationMs: number,
    ownError: boolean,
    output: OutputRef | null,
  ): string {
    if (completion?.display !== undefined && status !== 'cancelled' && (!error || ownError)) return completion.display;
    // What the display says was kept is what the output refs hold: nothing published, nothing claimed.
    const streams = keptStreams(output);
    if (status === 'success') {
      const sizes = streams.map((s) => `${s.name} ${formatBytes(s.bytes)}`).join(', ');
      return `${this.tool.name} finished in ${formatDuration(durationMs)} (${sizes})`;
    }
    return incompleteDisplay({
      tool: this.tool.name,
      status,
      durationMs,
      streams,
      lost: output === null && this.capture.stats().some((c) => c.bytes > 0),
      reason: error ? `${error.code}: ${error.message}` : (completion?.note ?? 'the tool reported failure'),
      summary: summarizeArgs(this.args),
    });
  }

  /** Kills every process group the tool registered (synchronous: also used from a process 'exit' hook). */
  killProcessGroups(): void {
    for (const pid of this.pgids) {
      killProcessGroup(pid);
      this.deps.processes?.untrack(pid);
    }
    // Killed once: a later call (the exit hook after finish) must not kill a pid reused meanwhile.
    this.pgids.clear();
  }

  /** The live display so far (bounded). */
  get liveDisplay(): string {
    return this.live.text;
  }
}

/** Throws EBADARGS unless `ms` is absent or a duration a timer can wait (setTimeout fires after 1 ms beyond 2^31-1). */
function assertTimeout(ms: unknown): void {
  if (ms === undefined) return;
  if (typeof ms !== 'number' || !(ms > 0) || ms > MAX_TIMER_MS) {
    throw new BadArgumentsError(
      `timeoutMs must be a number of milliseconds above 0 and at most ${MAX_TIMER_MS}, got ${JSON.stringify(ms) ?? String(ms)}`,
      { timeoutMs: typeof ms === 'number' && Number.isFinite(ms) ? ms : String(ms) },
    );
  }
}

function summarizeArgs(args: unknown): string {
  if (args && typeof args === 'object' && typeof (args as { command?: unknown }).command === 'string') {
    return (args as { command: string }).command;
  }
  try {
    return JSON.stringify(args) ?? '';
  } catch {
    return '';
  }
}

/** Largest display event, in UTF-16 code units (so a subscriber's queue holds at most queueLimit × 16 KiB). */
export const MAX_DISPLAY_EVENT_CHARS = 8192;

/** Splits display text into events of at most {@link MAX_DISPLAY_EVENT_CHARS}, never inside a surrogate pair. */
export function displayFrames(text: string): string[] {
  if (text.length <= MAX_DISPLAY_EVENT_CHARS) return [text];
  const frames: string[] = [];
  let i = 0;
  while (i < text.length) {
    let end = Math.min(text.length, i + MAX_DISPLAY_EVENT_CHARS);
    const c = text.charCodeAt(end - 1);
    if (end < text.length && c >= 0xd800 && c <= 0xdbff) end--;
    frames.push(text.slice(i, end));
    i = end;
  }
  return frames;
}

/** `text` cut to at most `max` UTF-8 bytes on a code point boundary, with an ellipsis when cut. */
function clipUtf8(text: string, max: number): string {
  const full = Buffer.from(text);
  if (full.length <= max) return text;
  let end = max - 3; // room for the ellipsis
  while (end > 0 && ((full[end] as number) & 0xc0) === 0x80) end--; // back to the start of a character
  return `${full.subarray(0, end).toString('utf8')}…`;
}

/**
 * An error as it arrived from a worker, held to the bounds the worker runtime
 * applies (workers/bounds.ts): a message past its bound is cut with a marker
 * (no whole text: none was sent), details past theirs are replaced, and a
 * shape that is not an error at all is a protocol error. The worker bounds
 * first; this keeps the engine from holding more even when it did not.
 */
function boundArrivedError(e: SerializedError): SerializedError {
  if (typeof e?.message !== 'string' || typeof e.code !== 'string') {
    return serializeError(new ProtocolError('a worker reported an error without a code and a message'));
  }
  const max = COMPLETION_BOUNDS.errorMessageBytes;
  let message = e.message;
  if (Buffer.byteLength(message, 'utf8') > max) {
    const full = Buffer.byteLength(message, 'utf8');
    const { end, bytes } = utf8PrefixEnd(message, max - cutMarkerBytes(full));
    message = `${detachString(message.slice(0, end))}${cutMarker(full - bytes)}`;
  }
  let details = e.details;
  if (details !== undefined) {
    let json: string | undefined;
    try {
      json = JSON.stringify(details);
    } catch {
      json = undefined;
    }
    if (json === undefined || Buffer.byteLength(json, 'utf8') > COMPLETION_BOUNDS.errorDetailsBytes) {
      details = {
        cut:
          json === undefined
            ? 'details were not JSON'
            : `details over ${COMPLETION_BOUNDS.errorDetailsBytes} bytes of JSON were dropped`,
      };
    }
  }
  if (message === e.message && details === e.details) return e;
  return details === undefined ? { code: e.code, message } : { code: e.code, message, details };
}

/**
 * The resource-limit error of a completion whose terminal fields pass their
 * bounds, if any. The worker runtime bounds them before posting
 * (workers/bounds.ts); this is the engine's own check of what arrived, so a
 * worker that did not (or could not) still cannot make the engine keep them.
 */
function oversizedCompletion(c: WireCompletion): ResourceLimitError | undefined {
  const b = COMPLETION_BOUNDS;
  if ((c.messages?.length ?? 0) > b.messages || (c.attachments?.length ?? 0) > b.attachments) {
    return new ResourceLimitError(
      `the completion has ${c.messages?.length ?? 0} messages and ${c.attachments?.length ?? 0} attachments; at most ${b.messages} and ${b.attachments}`,
    );
  }
  const fields = Buffer.byteLength(JSON.stringify({ m: c.metadata ?? null, e: c.messages ?? null }));
  if (fields > b.fieldsBytes) {
    return new ResourceLimitError(
      `the completion's metadata and messages take ${fields} bytes, more than ${b.fieldsBytes}`,
    );
  }
  let attached = 0;
  for (const a of c.attachments ?? []) attached += a.data.length;
  if (attached > b.attachmentsBytes) {
    return new ResourceLimitError(
      `the completion's attachments take ${attached} bytes, more than ${b.attachmentsBytes}`,
    );
  }
  return undefined;
}

/** A final display bounded like the live one: its beginning, and a marker saying how much was elided. */
function clipDisplay(display: string, maxBytes: number): string {
  const bytes = Buffer.byteLength(display);
  if (bytes <= maxBytes) return display;
  const kept = clipUtf8(display, maxBytes - 64);
  return `${kept}\n[… ${bytes - Buffer.byteLength(kept)} more bytes of display elided]`;
}

/** The streams an output ref holds, as displays list them (a page, a single output, named streams, or none). */
function keptStreams(output: OutputRef | null): Array<{ name: string; bytes: number; lines: number }> {
  if (output === null) return [];
  if (output.kind === 'streams') return output.streams.map((s) => ({ name: s.name, bytes: s.bytes, lines: s.lines }));
  return [{ name: output.kind === 'page' ? 'page' : 'output', bytes: output.bytes, lines: output.lines }];
}

/** `text` (cut by the worker from a whole of `fullBytes`) with a marker saying how much was cut and where the whole is. */
export function textWithCutMarker(text: string, fullBytes: number | undefined, whole: TextRef | undefined): string {
  if (fullBytes === undefined) return text;
  const cut = fullBytes - Buffer.byteLength(text, 'utf8');
  if (cut <= 0) return text;
  return `${text}${cutMarker(cut, whole?.digest)}`;
}

/** The error with the cut marker on its message (see {@link textWithCutMarker}). */
function withCutMarker(error: SluiceError, fullBytes: number | undefined, whole: TextRef | undefined): SluiceError {
  const message = textWithCutMarker(error.message, fullBytes, whole);
  return message === error.message ? error : makeError(error.code, message, error.details);
}
