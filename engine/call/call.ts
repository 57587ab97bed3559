/** One call, main side: from the worker's messages to the terminal result, finalised exactly once (finish.ts). */
import { randomUUID } from 'node:crypto';
import type { MessagePort } from 'node:worker_threads';
import { EventHub } from '../events/hub.js';
import { displayFrames, LiveDisplay } from '../presentation/display.js';
import { clipDisplay } from '../presentation/final-display.js';
import { previewBudget } from '../presentation/model-view.js';
import { MODEL_STATUS_RESERVE } from '../presentation/options.js';
import { isToolProcessGroup, killProcessGroup } from '../processes/process-group.js';
import { CallEndpoint } from '../protocol/call-endpoint.js';
import {
  CancelledError,
  ProtocolError,
  type SerializedError,
  type SluiceError,
  serializeError,
  TimeoutError,
  toSluiceError,
} from '../protocol/errors.js';
import type { TextKind, WorkerMessage } from '../protocol/messages.js';
import { Comlink, installErrorTransfer } from '../protocol/rpc.js';
import type { SandboxPolicy } from '../protocol/sandbox.js';
import type { ToolInfo } from '../registry.js';
import type { CallEvent, TerminalResult } from '../result.js';
import { callerAbortError } from './abort-reason.js';
import { approvalService } from './approval.js';
import { boundArrivedError, oversizedCompletion } from './arrived.js';
import type { ApprovalPolicy, CallDeps, CallHandle, CallOptions, InternalCallOptions } from './call-types.js';
import { assertPreview, assertTimeout } from './call-types.js';
import { Capture } from './capture.js';
import { asksOnly } from './default-approval.js';
import { finishCall } from './finish.js';
import { FullTexts } from './full-text.js';
import { Intake } from './intake.js';
import { PageCapture } from './page-capture.js';
import { ProgressTicker } from './progress.js';
import { type Outcome, terminalStatus } from './terminal-status.js';
import { parseCompletion } from './wire-completion.js';

/** How long a completion may trail its task's result (they travel on different ports). */
const LATE_COMPLETION_MS = 2000;
/** How long messages a dead worker posted may trail its death. */
const LATE_MESSAGES_MS = 50;

/** A running call. */
export class Call {
  readonly callId: string;
  readonly tool: ToolInfo;
  readonly session: string | undefined;
  readonly hub: EventHub<CallEvent>;
  /** Settles with the terminal result; never rejects. */
  readonly result: Promise<TerminalResult>;
  /** Largest number of bytes in flight (received, not yet on disk) seen; for tests of backpressure. */
  get maxInFlight(): number {
    return this.intake.maxInFlight;
  }
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
  private readonly intake: Intake;
  private ended = false;
  private cancelRequested: SluiceError | undefined;
  private failure: SluiceError | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private settleTimer: NodeJS.Timeout | undefined;
  private resolve!: (r: TerminalResult) => void;
  private readonly unlinkSignal: (() => void) | undefined;
  private readonly keepPage: boolean;
  private readonly sandbox: SandboxPolicy | undefined;
  private readonly progress: ProgressTicker;

  constructor(deps: CallDeps, tool: ToolInfo, args: unknown, options: CallOptions, internal: InternalCallOptions = {}) {
    assertTimeout(options.timeoutMs);
    assertPreview(options.preview);
    this.deps = deps;
    this.keepPage = internal.keepPage === true;
    this.sandbox = internal.sandbox;
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
      this.capture = new Capture(deps.store, tool.output, {
        ...limits,
        maxStreamBytes: s.maxStreamBytes,
        preview: options.preview ?? tool.preview ?? s.toolOutput.preview ?? 'head',
        tailShare: s.toolOutput.tailShare,
      });
    }
    this.progress = new ProgressTicker(() => this.publishProgress());
    this.texts = new FullTexts(deps.store, { maxBytes: s.maxStreamBytes });
    this.intake = new Intake(this.capture, this.texts, {
      failed: () => this.failure !== undefined,
      stopping: () => this.cancelRequested !== undefined || this.failure !== undefined,
      fail: (err) => this.failWith(err),
      sendCredit: (n) => {
        if (this.port && !this.ended) this.deps.pool.send(this.port, { t: 'credit', c: this.callId, n });
      },
      window: s.window,
      creditWait: () => this.deps.metrics?.creditWait(),
    });
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
        ...(this.sandbox ? { sandbox: this.sandbox } : {}),
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
      storeDir: this.deps.store.locator,
      displayBytes: this.deps.settings.liveDisplayBytes,
      ...askOnlyField(this.deps.approve),
      ...(this.sandbox ? { sandbox: this.sandbox } : {}),
    };
    const isolation = this.tool.isolation;
    this.deps.pool.run(task, { signal: this.piscinaAbort.signal, callId: this.callId, sink: this, isolation }).then(
      () => {
        // The done/fail message was posted before, on another port, and the two ports are not
        // ordered: a timer waits for it only when it has not landed by the next turn.
        setImmediate(() => {
          if (this.ended) return;
          this.settleTimer = setTimeout(() => {
            void this.finish({ kind: 'crash', error: new ProtocolError('the worker finished without a completion') });
          }, LATE_COMPLETION_MS);
        });
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
    this.graceTimer = setTimeout(() => this.giveUp(err), this.deps.settings.graceMs);
  }

  /**
   * The tool did not stop within the grace period: an isolated call's thread
   * is terminated; a shared call alone ends now, and its worker retires the
   * thread once idle (pool.abandon).
   */
  private giveUp(err: SluiceError): void {
    if (this.ended) return;
    if (this.tool.isolation === 'thread' || !this.port) {
      this.piscinaAbort.abort(err);
      return;
    }
    this.deps.pool.abandon(this.callId, this.port, this.deps.settings.graceMs);
    void this.finish({ kind: 'crash', error: err });
  }

  /** Handles one message of this call from its worker. @internal */
  onMessage(m: WorkerMessage, port: MessagePort): void {
    if (this.ended) return;
    switch (m.t) {
      case 'start':
        this.port = port;
        if (JSON.stringify(m.output) !== declarationJson(this.tool.output)) {
          this.failWith(
            new ProtocolError(`${this.tool.name}: the worker's output declaration differs from the registered one`),
          );
        }
        if (this.cancelRequested) {
          port.postMessage({ t: 'abort', c: this.callId, reason: this.cancelRequested.message });
          const err = this.cancelRequested;
          this.graceTimer ??= setTimeout(() => this.giveUp(err), this.deps.settings.graceMs);
        }
        return;
      case 'chunk':
        this.intake.chunk(m.s, m.b);
        if (this.capture instanceof Capture) this.progress.note();
        return;
      case 'display': {
        this.live.append(m.text);
        // Subscriber queues are bounded in events; bounded events make them bounded in bytes.
        for (const text of displayFrames(m.text)) {
          const ev: CallEvent = { type: 'display', callId: this.callId, text };
          this.hub.publish(ev);
          this.deps.engineHub.publish(ev);
        }
        this.intake.credit(Math.min(m.n, this.deps.settings.window));
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
          Comlink.expose(
            approvalService(this.deps.approve, {
              tool: this.tool.name,
              callId: this.callId,
              ...(this.session !== undefined ? { session: this.session } : {}),
            }),
            this.endpoint.asComlink(),
          );
        }
        this.endpoint.deliver(m.m);
        return;
      case 'text':
        this.intake.text(m.k, m.b);
        return;
      case 'done': {
        const parsed = parseCompletion(m.completion);
        if (!parsed.success) {
          void this.finish({
            kind: 'fail',
            error: serializeError(new ProtocolError(`invalid completion: ${parsed.message}`)),
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

  /** One progress event: bytes and lines each stream holds now (`''` names a single output). */
  private publishProgress(): void {
    const single = this.tool.output.kind === 'single';
    const streams = (this.capture as Capture).stats().map((c) => ({ ...c, name: single ? '' : c.name }));
    const ev: CallEvent = { type: 'progress', callId: this.callId, elapsedMs: Date.now() - this.startedAt, streams };
    this.hub.publish(ev);
    this.deps.engineHub.publish(ev);
  }

  private async finish(outcome: Outcome, preset?: SluiceError): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.graceTimer);
    clearTimeout(this.timeoutTimer);
    clearTimeout(this.settleTimer);
    this.progress.stop();
    this.unlinkSignal?.();
    this.deps.pool.detach(this.callId);
    this.killProcessGroups();
    this.deps.onEnded?.(this.callId, this.tool);
    const decided = terminalStatus({
      outcome,
      failure: preset ?? this.failure,
      cancelRequested: this.cancelRequested,
      tool: this.tool.name,
    });
    const { result, pageBytes } = await finishCall(
      {
        callId: this.callId,
        tool: this.tool,
        args: this.args,
        session: this.session,
        startedAt: this.startedAt,
        capture: this.capture,
        texts: this.texts,
        textSizes: this.textSizes,
        store: this.deps.store,
        maxModelBytes: this.deps.settings.toolOutput.maxModelBytes,
        recorder: this.deps.recorder,
        keepPage: this.keepPage,
        sandbox: this.sandbox,
      },
      decided,
      outcome.kind === 'done' ? outcome.completion : undefined,
    );
    this.pageBytes = pageBytes;
    const ev: CallEvent = { type: 'completed', callId: this.callId, result };
    this.hub.close(ev);
    this.deps.engineHub.publish(ev);
    this.deps.onSettled(this);
    this.resolve(result);
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

  /** A handle on this call; getters, so that one taken mid-call does not freeze them. */
  handle(): CallHandle {
    const call = this;
    return {
      callId: this.callId,
      result: this.result,
      events: () => call.hub.subscribe(),
      cancel: (reason?: string) => call.cancel(reason),
      get liveDisplay() {
        return call.liveDisplay;
      },
      get maxInFlight() {
        return call.maxInFlight;
      },
    };
  }
}

/** The JSON of each registered output declaration, made once (every call's start is checked against it). */
const declarationJsons = new WeakMap<object, string>();

function declarationJson(decl: ToolInfo['output']): string {
  let json = declarationJsons.get(decl);
  if (json === undefined) {
    json = JSON.stringify(decl);
    declarationJsons.set(decl, json);
  }
  return json;
}

/** The task's `askOnly`, when the approval policy says which kinds it decides (see ASKS_ONLY). */
function askOnlyField(policy: ApprovalPolicy): { askOnly?: string[] } {
  const kinds = asksOnly(policy);
  return kinds ? { askOnly: [...kinds] } : {};
}
