/** Engine options, validated with zod: EBADOPTION quoting the bad value. */
import { homedir } from 'node:os';
import {
  defaultPoolOptions,
  MAX_CALLS_PER_THREAD,
  MAX_CONCURRENCY,
  MAX_THREADS,
  MIN_WORKER_HEAP_MB,
  poolWidth,
} from './pool/pool.js';
import { parseToolOutputOptions, type ToolOutputOptions } from './presentation/options.js';
import { BadOptionError } from './protocol/errors.js';
import { firstIssue } from './protocol/issues.js';
import { MAX_TIMER_MS } from './protocol/limits.js';
import { MIN_WINDOW_BYTES } from './protocol/messages.js';
import type { SandboxPolicy, SandboxSpec } from './protocol/sandbox.js';
import { z } from './protocol/zod.js';
import { resolveSandbox, type SandboxContext } from './sandbox/policy.js';

/** Options of {@link Engine.open}. */
export interface EngineOptions {
  /** Store directory, or `s3://bucket/prefix` for an S3 store (docs/store.md, "S3"). @default `$SLUICE_STORE`, else `./.sluice` */
  store?: string;
  /** Model-view limits: per-stream `maxLines` (2000) and `maxBytes` (51200), and the aggregate `maxModelBytes` (256 KiB). */
  toolOutput?: Partial<ToolOutputOptions>;
  /**
   * Calls running at once, over all threads; more wait in a queue. At most
   * 1024. Shared threads always carry this many (`callsPerThread` grows to
   * fit unless set); EBADOPTION when `threads` × `callsPerThread`, both set,
   * cannot. Calls of `isolation: 'thread'` tools also wait for one of
   * max(16, 2 × cores) isolated threads.
   * @default max(16, 2 × cores), at most `threads` × `callsPerThread` when both are set
   */
  concurrency?: number;
  /** Most worker threads carrying shared calls (tools of `isolation: 'shared'`, the default). @default max(1, os.availableParallelism() − 1): the main thread, which captures, keeps a core */
  threads?: number;
  /** Most calls one shared thread carries at once (at most 1024). @default max(256, ⌈concurrency / threads⌉): enough to carry `concurrency` */
  callsPerThread?: number;
  /** Worker threads kept warm. @default 1 */
  minThreads?: number;
  /** Credit window per call, in bytes: the most output in flight between a worker and the disk. @default 1 MiB */
  window?: number;
  /** Milliseconds a cancelled tool has to stop before its worker is terminated. @default 2000 */
  graceMs?: number;
  /** Hard bound on one stream's size in bytes. @default 8 GiB */
  maxStreamBytes?: number;
  /** Heap limit per worker in MiB. @default 512 */
  workerHeapMb?: number;
  /** Bytes of live display kept per call (newest kept). @default 64 KiB */
  liveDisplayBytes?: number;
  /** Events queued per live subscriber before it is marked lagged. @default 1024 */
  subscriberQueue?: number;
  /** Working directory given to tools, and the root the default approval policy allows reads in. @default process.cwd() */
  cwd?: string;
  /**
   * The sandbox the processes of tools (bash, MCP servers, plugin processes
   * that ask for it) run under (docs/security.md); each call may narrow it.
   * @default none: processes run as the engine's user, unconfined
   */
  sandbox?: SandboxSpec;
}

const positiveInt = z.number().int().positive();

const schema = z.strictObject({
  store: z.string().min(1).optional(),
  toolOutput: z.unknown().optional(),
  concurrency: positiveInt.max(MAX_CONCURRENCY).optional(),
  threads: positiveInt.max(MAX_THREADS).optional(),
  callsPerThread: positiveInt.max(MAX_CALLS_PER_THREAD).optional(),
  minThreads: z.number().int().nonnegative().optional(),
  window: positiveInt
    .min(MIN_WINDOW_BYTES)
    .max(1024 * 1024 * 1024)
    .optional(),
  graceMs: z.number().int().nonnegative().max(MAX_TIMER_MS).optional(),
  maxStreamBytes: positiveInt.optional(),
  workerHeapMb: positiveInt.min(MIN_WORKER_HEAP_MB).optional(),
  liveDisplayBytes: positiveInt.min(256).optional(),
  subscriberQueue: positiveInt.optional(),
  cwd: z.string().min(1).optional(),
  sandbox: z.unknown().optional(),
});

/** Options with every default applied. */
export interface ResolvedOptions {
  toolOutput: ToolOutputOptions;
  concurrency: number;
  threads: number;
  callsPerThread: number;
  minThreads: number;
  window: number;
  graceMs: number;
  maxStreamBytes: number;
  workerHeapMb: number;
  liveDisplayBytes: number;
  subscriberQueue: number;
  cwd: string;
  sandbox: SandboxPolicy | undefined;
  sandboxContext: SandboxContext;
}

/** Validates options and applies defaults. */
export function resolveOptions(
  input: EngineOptions,
  defaults: { concurrency: number; cwd: string; storeRoot: string },
): ResolvedOptions {
  const r = schema.safeParse(input ?? {});
  if (!r.success) {
    const i = firstIssue(r.error, input ?? {});
    throw new BadOptionError(`option ${i.path || '(options)'}: ${i.message} (${i.got})`, { option: i.path });
  }
  const o = r.data;
  const toolOutput = parseToolOutputOptions(o.toolOutput ?? {});
  const cwd = o.cwd ?? defaults.cwd;
  const sandboxContext = { cwd, home: homedir(), storeRoot: defaults.storeRoot };
  // Pool defaults come from the pool, so the pool Engine.open starts early and this one always agree.
  const pool = defaultPoolOptions();
  const threads = o.threads ?? pool.threads;
  const width = poolWidth(
    { concurrency: o.concurrency, threads, callsPerThread: o.callsPerThread },
    defaults.concurrency,
  );
  if (!width.fits) {
    // A silent cap would run fewer calls at once than asked for.
    throw new BadOptionError(
      `option concurrency: ${width.concurrency} calls at once need more than threads (${threads}) × callsPerThread (${width.callsPerThread}) = ${threads * width.callsPerThread}: raise callsPerThread or threads, or leave callsPerThread unset`,
      { option: 'concurrency' },
    );
  }
  return {
    toolOutput,
    concurrency: width.concurrency,
    threads,
    callsPerThread: width.callsPerThread,
    minThreads: o.minThreads ?? pool.minThreads,
    window: o.window ?? 1024 * 1024,
    graceMs: o.graceMs ?? 2000,
    maxStreamBytes: o.maxStreamBytes ?? 8 * 1024 ** 3,
    workerHeapMb: o.workerHeapMb ?? pool.maxOldGenerationSizeMb,
    liveDisplayBytes: o.liveDisplayBytes ?? 64 * 1024,
    subscriberQueue: o.subscriberQueue ?? 1024,
    cwd,
    sandbox: resolveSandbox(o.sandbox, sandboxContext),
    sandboxContext,
  };
}
