/**
 * The tool authoring API (`sluice/tool`): a tool module default-exports
 * the result of {@link defineTool}; it is imported only in worker threads.
 */
import type { Writable } from 'node:stream';
import { BadDeclarationError } from '../engine/protocol/errors.js';
import type { CompletionFields, PreparedOperation, ToolIsolation } from '../engine/protocol/messages.js';
import type { SandboxPolicy } from '../engine/protocol/sandbox.js';
import { type OutputDeclaration, type PreviewMode, validateDeclaration } from '../engine/protocol/streams.js';
import type { z } from '../engine/protocol/zod.js';
import type { SearchOptions, SearchPage } from '../store/search.js';
import type { PreparedSandbox } from './sandbox/prepare.js';

export type {
  Attachment,
  CompletionFields,
  EmittedMessage,
  PreparedOperation,
  ToolIsolation,
} from '../engine/protocol/messages.js';
export type { SandboxPolicy } from '../engine/protocol/sandbox.js';
export type { PreparedSandbox } from './sandbox/prepare.js';

/** Host services a tool may call (they run on the main thread, reached through comlink). */
export interface HostServices {
  /** Asks the host's approval policy about an operation; rejects with EDENIED when refused. */
  approve(op: PreparedOperation): Promise<void>;
}

/** Paging options of {@link ArtifactReader}: zero-based `offset`, `limit` lines, `byteOffset` into the first line. */
export interface ArtifactPageOptions {
  offset?: number;
  limit?: number;
  /** Continues a line longer than a page: the `nextByteOffset` of the page before. */
  byteOffset?: number;
}

/** What a page of an artifact is, besides its content. */
export interface ArtifactPageInfo {
  offset: number;
  /** Lines the page holds, a line it holds only part of included. */
  lines: number;
  totalLines: number;
  nextOffset: number | null;
  /** Non-null when the page stops inside line `nextOffset`: the `byteOffset` that continues it. */
  nextByteOffset: number | null;
  /** True when the page's bytes are not valid UTF-8 (its text shows U+FFFD for them). */
  lossy: boolean;
  digest: string;
  stream?: string;
}

/** A page of an artifact as text (invalid UTF-8 as U+FFFD). */
export interface ArtifactPage extends ArtifactPageInfo {
  content: string;
}

/** A page of an artifact as its stored bytes. */
export interface ArtifactPageBytes extends ArtifactPageInfo {
  bytes: Uint8Array;
}

/** Reads artifacts by URI. */
export interface ArtifactReader {
  /** Reads lines `[offset, offset + limit)` of the artifact as text (EBADURI, ENOTFOUND, EINTEGRITY, EUNKNOWNSTREAM, ENOTMANIFEST, ERESOURCELIMIT, EBADARGS). */
  readPage(uri: string, opts?: ArtifactPageOptions): Promise<ArtifactPage>;
  /** The same page as its stored bytes, exactly. */
  readPageBytes(uri: string, opts?: ArtifactPageOptions): Promise<ArtifactPageBytes>;
  /** One page of matching lines of the artifact, in one streaming pass (store/search.ts); the same errors as a read, EBADARGS for bad options. */
  search(uri: string, opts: SearchOptions): Promise<SearchPage>;
}

/** What a tool's `run` and `prepare` receive besides their arguments. */
export interface ToolContext {
  /** The call's id, for correlation in logs. */
  readonly callId: string;
  /** Aborted when the call is cancelled; stop promptly, the worker is terminated after a grace period. */
  readonly signal: AbortSignal;
  /** Working directory the host configured. */
  readonly cwd: string;
  /**
   * The writer of a declared stream, or of the single output without a
   * name. Strings are stored as UTF-8, bytes exactly. It applies the
   * engine's backpressure (`pipeline(child.stdout, ctx.stream('stdout'))`
   * works); writing on while more than max(16 MiB, 4 windows) waits fails
   * with ERESOURCELIMIT, an undeclared name with EUNDECLAREDSTREAM.
   */
  stream(name?: string): Writable;
  /** Appends text to the live UI display, never to a stream; when the engine lags, the oldest pending text is elided. */
  display(text: string): void;
  /** Host services. */
  readonly host: HostServices;
  /** Reads artifacts by URI, straight from the store in this worker, pages bounded by 2000 lines and 2 MiB. */
  readonly artifacts: ArtifactReader;
  /** Registers a child process group the engine must kill if the call ends or its worker dies. */
  trackProcessGroup(pid: number): void;
  /** The sandbox policy the host set for this call's processes (docs/security.md); undefined: none. */
  readonly sandbox: SandboxPolicy | undefined;
  /**
   * The command that runs `file args` in `cwd` under this call's sandbox:
   * spawn it instead, pass its exit to `verdict`, `release` once it exited.
   * Throws EUNSUPPORTED where the sandbox cannot be had: never run unconfined then.
   */
  sandboxed(file: string, args: readonly string[], cwd?: string): PreparedSandbox;
}

/** Completion of a tool that streamed its output (or produced none). */
export interface StreamedCompletion extends CompletionFields {
  mode: 'streamed';
}

/** Completion of a tool that supplies its whole output once. */
export interface FullCompletion extends CompletionFields {
  mode: 'full';
  /** Text, bytes, or one per declared stream (missing ones empty); anything else fails with EBADOUTPUT. */
  output: FullOutput;
}

/** The value of one stream in a full completion: text (stored as UTF-8) or bytes (stored as given). */
export type OutputValue = string | Uint8Array;

/** The output of a full completion: one value for single output, a value per declared stream for named streams. */
export type FullOutput = OutputValue | Readonly<Record<string, OutputValue>>;

/** What `run` resolves to. Nothing at all means a streamed completion with defaults. */
export type Completion = StreamedCompletion | FullCompletion;

/** Builders for the two completion modes. */
export const complete = {
  /** Finalizes what was streamed; supplies only terminal fields. */
  streamed(fields: CompletionFields = {}): StreamedCompletion {
    return { ...fields, mode: 'streamed' };
  },
  /** Supplies the whole output once; the engine captures it like streamed output. */
  full(output: FullOutput, fields: CompletionFields = {}): FullCompletion {
    return { ...fields, mode: 'full', output };
  },
};

/** What {@link defineTool} accepts. */
export interface ToolSpec<S extends z.ZodObject> {
  /** Registry name: `[a-z][a-z0-9_.-]*`, at most 64 characters. */
  name: string;
  description: string;
  /** Argument schema; made strict, so unknown fields are rejected. */
  args: S;
  /** `'single'`, or the stream names in rendering order. */
  output: 'single' | readonly string[];
  /** Opts out of output retention and truncation; honoured only for sluice's built-in tools. */
  selfPaginating?: boolean;
  /**
   * `'shared'` (default): a worker thread carries this tool's calls beside
   * others. `'thread'`: a thread per call, for a tool that blocks its event
   * loop, needs the whole heap or may crash (EWORKERCRASH for its neighbours).
   */
  isolation?: ToolIsolation;
  /**
   * How the model sees truncated streams: `head` or `head+tail`; a call's `preview` overrides it.
   * @default the engine's `toolOutput.preview`
   */
  preview?: PreviewMode;
  /** Describes the operation for the host's approval policy; runs before `run`. */
  prepare?(args: z.infer<S>, ctx: ToolContext): PreparedOperation | Promise<PreparedOperation>;
  /** Does the work. */
  run(args: z.infer<S>, ctx: ToolContext): Promise<Completion | undefined> | Completion | undefined;
}

/** A validated tool definition. */
export interface ToolDefinition<S extends z.ZodObject = z.ZodObject> extends Omit<ToolSpec<S>, 'output'> {
  readonly output: OutputDeclaration;
  readonly [TOOL_BRAND]: true;
}

/** Marks objects made by {@link defineTool}. */
export const TOOL_BRAND = Symbol.for('sluice.tool/1');

const TOOL_NAME = /^[a-z][a-z0-9_.-]{0,63}$/;

/** Defines a tool; a bad name or output declaration throws EBADDECL at registration, not mid-call. */
export function defineTool<S extends z.ZodObject>(spec: ToolSpec<S>): ToolDefinition<S> {
  if (typeof spec?.name !== 'string' || !TOOL_NAME.test(spec.name)) {
    throw new BadDeclarationError(`tool name ${JSON.stringify(spec?.name)} must match ${TOOL_NAME}`);
  }
  // Duck-typed: a plugin may bring its own copy of zod, so instanceof would lie.
  const args = spec.args as unknown as { safeParse?: unknown; strict?: unknown; shape?: unknown };
  if (typeof args?.safeParse !== 'function' || typeof args.strict !== 'function' || typeof args.shape !== 'object') {
    throw new BadDeclarationError(`tool ${spec.name}: args must be a zod object schema`);
  }
  if (typeof spec.run !== 'function') throw new BadDeclarationError(`tool ${spec.name}: run must be a function`);
  const isolation: unknown = spec.isolation;
  if (isolation !== undefined && isolation !== 'shared' && isolation !== 'thread') {
    const got = typeof isolation === 'string' ? JSON.stringify(isolation.slice(0, 64)) : typeof isolation;
    throw new BadDeclarationError(`tool ${spec.name}: isolation must be 'shared' or 'thread', not ${got}`);
  }
  const output = validateDeclaration(spec.output === 'single' ? { kind: 'single' } : spec.output, `tool ${spec.name}`);
  return Object.freeze({
    ...spec,
    description: String(spec.description ?? ''),
    args: spec.args.strict() as unknown as S,
    output,
    [TOOL_BRAND]: true as const,
  });
}

/** True when `v` was made by {@link defineTool}. */
export function isToolDefinition(v: unknown): v is ToolDefinition {
  return typeof v === 'object' && v !== null && (v as Record<symbol, unknown>)[TOOL_BRAND] === true;
}

// zod's `z` for tool authors: the engine's own copy in this thread (see engine/protocol/zod.ts).
export { z } from '../engine/protocol/zod.js';
export { handOver } from './transfer.js';
