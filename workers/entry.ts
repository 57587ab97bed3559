/** The piscina task entry of every worker thread: loads tool modules (only here) and runs calls. */
import { pathToFileURL } from 'node:url';
import { threadId, workerData } from 'node:worker_threads';
import {
  BadArgumentsError,
  BadDeclarationError,
  BadModuleError,
  BadOutputError,
  CancelledError,
  MixedModeError,
  serializeError,
  UndeclaredStreamError,
} from '../engine/protocol/errors.js';
import { DECLINED_TASK_MESSAGE, RETIRE_EXIT_CODE } from '../engine/protocol/limits.js';
import type {
  CallTask,
  DescribeResult,
  EngineMessage,
  Task,
  TextKind,
  ToolDescription,
  WireCompletion,
} from '../engine/protocol/messages.js';
import { z } from '../engine/protocol/zod.js';
import type { Store } from '../store/store.js';
import { boundCompletion, boundError } from './bounds.js';
import { CallRun, describeValue } from './context.js';
import { enginePort, onEngineMessage, post } from './engine-port.js';
import { type ArtifactReader, type Completion, isToolDefinition, type ToolDefinition } from './tool.js';

const modules = new Map<string, Promise<ToolDefinition>>();
const stores = new Map<string, Promise<Store>>();

/**
 * Artifact reads on a store opened once per thread (its integrity cache
 * lives with it), loaded on the first read: most calls never read one.
 */
function artifactReader(storeDir: string): ArtifactReader {
  const open = async () => {
    let store = stores.get(storeDir);
    if (!store) {
      store = import('../store/store.js').then((m) => m.Store.open(storeDir));
      store.catch(() => stores.delete(storeDir));
      stores.set(storeDir, store);
    }
    return { read: await import('../store/pages.js'), store: await store };
  };
  return {
    readPage: async (uri, opts) => {
      const { read, store } = await open();
      return read.readPage(store, uri, opts);
    },
    readPageBytes: async (uri, opts) => {
      const { read, store } = await open();
      return read.readPageBytes(store, uri, opts);
    },
    search: async (uri, opts) => {
      const { store } = await open();
      return (await import('../store/search.js')).searchArtifact(store, uri, opts);
    },
  };
}

/** Imports a tool module once per thread and checks that it exports a tool. */
function loadTool(specifier: string): Promise<ToolDefinition> {
  let p = modules.get(specifier);
  if (!p) {
    p = (async () => {
      const url = /^[a-z][a-z0-9+.-]*:/i.test(specifier) ? specifier : pathToFileURL(specifier).href;
      let mod: Record<string, unknown>;
      try {
        mod = await import(url);
      } catch (err) {
        // defineTool rejects a bad declaration while the module evaluates: that is EBADDECL, not a broken module.
        if ((err as { code?: unknown })?.code === 'EBADDECL') {
          throw new BadDeclarationError(`${specifier}: ${(err as Error).message}`, { module: specifier });
        }
        throw new BadModuleError(`${specifier}: failed to import: ${(err as Error)?.message ?? String(err)}`, {
          module: specifier,
        });
      }
      const tool = mod.default ?? mod.tool;
      if (!isToolDefinition(tool)) {
        throw new BadModuleError(`${specifier}: exports no tool (default-export the result of defineTool)`, {
          module: specifier,
        });
      }
      return tool;
    })();
    // A failed import is not cached: the module may be fixed and registered again.
    p.catch(() => modules.delete(specifier));
    modules.set(specifier, p);
  }
  return p;
}

function describe(tool: ToolDefinition): ToolDescription {
  let argsSchema: unknown;
  try {
    argsSchema = z.toJSONSchema(tool.args as z.ZodType);
  } catch {
    argsSchema = { type: 'object' };
  }
  return {
    name: tool.name,
    description: tool.description,
    output: tool.output,
    selfPaginating: tool.selfPaginating === true,
    isolation: tool.isolation ?? 'shared',
    ...(tool.preview !== undefined ? { preview: tool.preview } : {}),
    argsSchema,
  };
}

function parseArgs(tool: ToolDefinition, args: unknown): unknown {
  const r = (tool.args as z.ZodType).safeParse(args ?? {});
  if (r.success) return r.data;
  const problems = r.error.issues.map((i) => {
    const where = i.path.length > 0 ? i.path.join('.') : '(arguments)';
    return `${where}: ${i.message}`;
  });
  throw new BadArgumentsError(`invalid arguments for ${tool.name}: ${problems.join('; ')}`, { issues: problems });
}

async function runCall(task: CallTask, abandon: () => void): Promise<void> {
  enginePort();
  let run: CallRun | undefined;
  const pending: EngineMessage[] = [];
  const off = onEngineMessage(task.callId, (m) => {
    if (m.t === 'abandon') {
      // The tool outlived its grace period and its call: what it still does belongs to no call,
      // so this thread takes no new one and retires once idle.
      tainted = true;
      abandon();
      return;
    }
    if (!run) return void pending.push(m);
    if (m.t === 'credit') run.gate.grant(m.n);
    else if (m.t === 'abort') run.abort.abort(new CancelledError(m.reason));
    else if (m.t === 'rpc') run.deliverRpc(m.m);
  });
  try {
    const tool = await loadTool(task.module);
    run = new CallRun(task.callId, task.window, tool.output);
    post({ t: 'start', c: task.callId, output: tool.output });
    for (const m of pending.splice(0)) {
      if (m.t === 'credit') run.gate.grant(m.n);
      else if (m.t === 'abort') run.abort.abort(new CancelledError(m.reason));
    }
    const r = run;
    const ctx = r.context(task.cwd, artifactReader(task.storeDir), task.sandbox);
    const completion = await (async (): Promise<WireCompletion> => {
      const args = parseArgs(tool, task.args);
      if (r.abort.signal.aborted) throw r.abort.signal.reason;
      if (tool.prepare) {
        const op = await tool.prepare(args as never, ctx);
        // The engine's policy allows this kind without looking (task.askOnly): no round trip.
        if (!task.askOnly || task.askOnly.includes(op.kind)) await ctx.host.approve(op);
      }
      if (r.abort.signal.aborted) throw r.abort.signal.reason;
      const result = (await tool.run(args as never, ctx)) as Completion | undefined;
      if (r.violation) throw r.violation;
      if (result?.mode === 'full') {
        if (r.streamed) {
          throw new MixedModeError(`${tool.name} streamed output and then also supplied full output; use one mode`);
        }
        await feedFull(r, tool, result.output);
      }
      await r.endWriters();
      await r.displayDrained();
      if (r.violation) throw r.violation;
      // `cut` belongs to the runtime (what it cut and sent whole), never to the tool.
      const {
        mode: _m,
        output: _o,
        cut: _c,
        ...fields
      } = (result ?? { mode: 'streamed' }) as Completion & {
        output?: unknown;
        cut?: unknown;
      };
      const bounded = await boundCompletion(fields, task.displayBytes, (k, text) => r.sendText(k, text));
      const wire = { mode: result?.mode ?? 'streamed', ...bounded.fields } as WireCompletion;
      if (bounded.cut) wire.cut = bounded.cut;
      return wire;
    })();
    post({ t: 'done', c: task.callId, completion });
  } catch (err) {
    const cancelled = run?.abort.signal.aborted === true;
    // Whatever the tool left half-written is still accepted output: flush it before reporting.
    if (run) {
      await run.endWriters().catch(() => {});
      await run.displayDrained();
    }
    const full = cancelled ? serializeError(run?.abort.signal.reason ?? err, 'ECANCELLED') : serializeError(err);
    // A thrown message can be huge: bounded, and sent whole when cut.
    const send = run ? (k: TextKind, text: string) => (run as CallRun).sendText(k, text) : async () => {};
    const { error, cut } = await boundError(full, send).catch(() => boundError(full, async () => {}));
    post({ t: 'fail', c: task.callId, error, cancelled, ...(cut !== undefined && run ? { cut } : {}) });
  } finally {
    run?.gate.close();
    off();
  }
}

/** True for what a full output may hold per stream: text, or bytes stored exactly as given. */
function isOutputValue(v: unknown): v is string | Uint8Array {
  return typeof v === 'string' || v instanceof Uint8Array;
}

function badOutput(tool: ToolDefinition, stream: string | undefined, v: unknown): BadOutputError {
  const where = stream === undefined ? 'its full output' : `the full output of stream ${JSON.stringify(stream)}`;
  return new BadOutputError(
    `${tool.name}: ${where} must be a string, Buffer or Uint8Array, not ${describeValue(v)}; nothing was published`,
    { stream: stream ?? null, type: describeValue(v) },
  );
}

/** Feeds a full completion's output through the writers; every value is checked before any byte is written. */
async function feedFull(run: CallRun, tool: ToolDefinition, output: unknown): Promise<void> {
  if (tool.output.kind === 'single') {
    if (!isOutputValue(output)) throw badOutput(tool, undefined, output);
    if (output.length > 0) await writeAll(run.writer(), output);
    return;
  }
  if (typeof output !== 'object' || output === null || Array.isArray(output) || output instanceof Uint8Array) {
    throw new BadOutputError(
      `${tool.name} declares named streams; its full output must map stream names to text or bytes, not ${describeValue(output)}`,
      { stream: null, type: describeValue(output) },
    );
  }
  const byName = output as Record<string, unknown>;
  for (const name of Object.keys(byName)) {
    if (!tool.output.streams.includes(name)) {
      throw new UndeclaredStreamError(`${tool.name}: full output names undeclared stream ${JSON.stringify(name)}`, {
        stream: name,
      });
    }
    if (!isOutputValue(byName[name])) throw badOutput(tool, name, byName[name]);
  }
  for (const name of tool.output.streams) {
    const value = byName[name] as string | Uint8Array | undefined;
    if (value !== undefined && value.length > 0) await writeAll(run.writer(name), value);
  }
}

function writeAll(w: NodeJS.WritableStream, value: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    w.write(value, (err) => (err ? reject(err) : resolve()));
  });
}

/** Calls this thread carries (a shared thread many, an isolated one one). */
let running = 0;
/** Set while an idle thread looks for leftovers: calls that arrive meanwhile wait for its verdict. */
let checking: Promise<boolean> | undefined;
/** An abandoned call's tool may still run here: the thread must retire. */
let tainted = false;
let retiring = false;

// The pool would rerun a retiring thread's sibling calls: a tool may not exit with that code.
const exit = process.exit.bind(process);
process.exit = ((code?: number | string | null) =>
  exit(Number(code) === RETIRE_EXIT_CODE ? 1 : (code ?? undefined))) as typeof process.exit;

/** The piscina task function. */
export default async function task(t: Task): Promise<DescribeResult | null> {
  if (t.kind === 'describe') {
    try {
      return describe(await loadTool(t.module));
    } catch (err) {
      return { error: serializeError(err, 'EBADMODULE') };
    }
  }
  // A call arriving during the idle check waits for it; if the thread retires, the call posted
  // nothing and the pool runs it elsewhere.
  while (checking) await checking;
  // A thread with an abandoned call, or about to retire, starts no new call: the pool runs it elsewhere.
  // Waiting for the exit instead would fail it with the thread if the thread has to be terminated.
  if (tainted || retiring) throw new Error(`${DECLINED_TASK_MESSAGE}${threadId}`);
  running++;
  try {
    await new Promise<void>((resolve) => {
      runCall(t, resolve).then(resolve, resolve);
    });
  } finally {
    running--;
  }
  if (running === 0 && !retiring) {
    checking = (async () => tainted || (await leftBehind()) !== undefined)();
    retiring = await checking;
    checking = undefined;
    // This task resolves first (its call started, it must not look unrun); a task handed over
    // meanwhile never starts and is rejected by the exit code that sends it elsewhere.
    if (retiring) setImmediate(() => exit(RETIRE_EXIT_CODE));
  }
  return null;
}

/** A task that does nothing: its only use is making piscina start a thread (NUDGE_EXPORT). */
export function nudge(): null {
  return null;
}

/** Active handles of an idle worker (its ports), counted by type; taken before the first call. */
const baseline = countResources();

function countResources(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}

/**
 * A tool may leave work behind (a timer, a socket, an untracked child) that
 * would run during a later call; a call must only fail by its own doing, so
 * a thread with leftovers retires. Handles cannot be told apart by call, so
 * the count is taken when the thread is idle. Returns the leftover type.
 */
async function leftBehind(): Promise<string | undefined> {
  // A preload still reading its files is the thread's own work, not a call's.
  await preloaded;
  // Handles of finished pipes and processes close on the next turns of the loop.
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
  const now = countResources();
  for (const [type, n] of now) {
    if (type === 'MessagePort' || type === 'FSReqCallback') continue;
    if (n > (baseline.get(type) ?? 0)) return type;
  }
  return undefined;
}

/**
 * The tool modules the pool asks a shared thread to import as it starts
 * (`workerData.preload`: bash, when the built-ins are registered): the import
 * runs while the thread's readiness and its first task cross to and from the
 * main thread, instead of after the task has arrived.
 */
const preloaded = Promise.all(preloadModules().map((m) => loadTool(m).catch(() => undefined)));

function preloadModules(): string[] {
  const list = (workerData as { preload?: unknown } | null)?.preload;
  return Array.isArray(list) ? list.filter((m): m is string => typeof m === 'string') : [];
}
