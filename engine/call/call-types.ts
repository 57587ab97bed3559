/** The contracts of one call: the host's approval, where records go, the options of a call, what it needs from its engine. */
import type { Store } from '../../store/store.js';
import type { EventHub } from '../events/hub.js';
import type { WorkerPool } from '../pool/pool.js';
import type { ToolOutputOptions } from '../presentation/options.js';
import type { ProcessGuard } from '../processes/process-guard.js';
import { BadArgumentsError } from '../protocol/errors.js';
import { MAX_TIMER_MS } from '../protocol/limits.js';
import type { PreparedOperation } from '../protocol/messages.js';
import type { SandboxPolicy, SandboxSpec } from '../protocol/sandbox.js';
import { PREVIEW_MODES, type PreviewMode } from '../protocol/streams.js';
import type { ToolInfo } from '../registry.js';
import type { CallEvent, TerminalResult } from '../result.js';
import type { SandboxContext } from '../sandbox/policy.js';
import type { Call } from './call.js';

/** Decides whether a prepared operation may run. Return false (or throw) to deny. */
export type ApprovalPolicy = (
  op: PreparedOperation,
  call: { tool: string; callId: string; session?: string },
) => boolean | Promise<boolean>;

/** A call as it starts, for its `call.started` record. */
export interface CallStartInfo {
  callId: string;
  tool: ToolInfo;
  args: unknown;
  session?: string;
  at: string;
  /** The sandbox policy its processes run under. */
  sandbox?: SandboxPolicy;
}

/** Where call records go (the session event log implements it). */
export interface CallRecorder {
  started(info: CallStartInfo): Promise<void>;
  /** A call ended; durable when it resolves. When it rejects, it is called once more with the failed result the caller then gets. */
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
  /** The engine's sandbox policy; undefined: its tools' processes run unconfined. */
  sandbox: SandboxPolicy | undefined;
  /** What a call's own sandbox spec resolves against. */
  sandboxContext: SandboxContext;
}

/** Options of one call. */
export interface CallOptions {
  /** Record the call in this session's event log (`[A-Za-z0-9._-]`, 1 to 128 characters); EBADARGS otherwise. */
  session?: string;
  /**
   * Aborting it cancels the call, keeping the reason (`cancelled by the
   * caller: <reason>`); a signal that timed out (`AbortSignal.timeout(ms)`)
   * fails it with ETIMEOUT, as `timeoutMs` would.
   */
  signal?: AbortSignal;
  /**
   * Fails the call with ETIMEOUT after this many milliseconds from its start,
   * waiting for a worker included. Above 0 and at most 2^31-1 (the longest a
   * timer waits); anything else is EBADARGS, synchronously from `Engine.call`.
   */
  timeoutMs?: number;
  /** The call's id. @default a random UUID */
  callId?: string;
  /**
   * How this call's truncated streams are previewed (`head` or `head+tail`); EBADARGS otherwise.
   * @default the tool's declared preview, else the engine's `toolOutput.preview`, else `'head'`
   */
  preview?: PreviewMode;
  /**
   * Narrows the engine's sandbox for this call's processes (docs/security.md):
   * a stricter filesystem mode, network off, a workspace inside the engine's,
   * fewer environment names, lower limits. Anything that would loosen the
   * engine's policy is EBADARGS, synchronously from `Engine.call`.
   * @default the engine's `sandbox`
   */
  sandbox?: SandboxSpec;
}

/** Options the engine itself sets on a call. */
export interface InternalCallOptions {
  /** Keep a self-paginating tool's page bytes after the call ends ({@link Call.pageBytes}), for a raw read. */
  keepPage?: boolean;
  /** The policy the call's processes run under (narrowed from the engine's before the call is made). */
  sandbox?: SandboxPolicy;
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
  /**
   * The call has ended, however it ended (its worker may have been
   * terminated): called once, as it is decided, before its result is
   * recorded. The MCP host releases what it holds for the call.
   */
  onEnded?(callId: string, tool: ToolInfo): void;
  onSettled(call: Call): void;
  /** Counts credit waits (engine/metrics.ts). */
  metrics?: { creditWait(): void };
}

/** Throws EBADARGS unless `ms` is absent or a duration a timer can wait (setTimeout fires at once beyond 2^31-1). */
export function assertTimeout(ms: unknown): void {
  if (ms === undefined) return;
  if (typeof ms !== 'number' || !(ms > 0) || ms > MAX_TIMER_MS) {
    throw new BadArgumentsError(
      `timeoutMs must be a number of milliseconds above 0 and at most ${MAX_TIMER_MS}, got ${JSON.stringify(ms) ?? String(ms)}`,
      { timeoutMs: typeof ms === 'number' && Number.isFinite(ms) ? ms : String(ms) },
    );
  }
}

/** Throws EBADARGS unless `mode` is absent or a preview mode. */
export function assertPreview(mode: unknown): void {
  if (mode === undefined || PREVIEW_MODES.includes(mode as PreviewMode)) return;
  throw new BadArgumentsError(
    `preview must be ${PREVIEW_MODES.map((m) => JSON.stringify(m)).join(' or ')}, got ${JSON.stringify(mode) ?? String(mode)}`,
    { preview: String(mode) },
  );
}

/** A handle on a running call. */
export interface CallHandle {
  /** The call's id: in its events, its terminal result and its session log records. */
  readonly callId: string;
  /** Settles with the terminal result (never rejects for tool-level failures). */
  readonly result: Promise<TerminalResult>;
  /** Live events of this call: started, display deltas, completed (a lagging subscriber gets `lagged` then completed). */
  events(): AsyncIterableIterator<CallEvent | { type: 'lagged'; dropped: number }>;
  /** Asks the call to stop. */
  cancel(reason?: string): void;
  /** The bounded live display so far. */
  readonly liveDisplay: string;
  /** Peak bytes in flight between worker and disk (never above the window). */
  readonly maxInFlight: number;
}
