/**
 * The wire schemas describe what the engine really produces: every message
 * between the engine and its workers during a mix of calls (streamed, full,
 * failed, thrown, cancelled, approved, a read), every live event, terminal
 * result, event-log record (a spilled one and a revert included), read page,
 * session list and replay validates, and validating changes nothing (no
 * unknown field is stripped, no lenient default kicks in).
 */
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { z } from 'zod';
import { Call } from '../../engine/call/call.js';
import { Engine } from '../../engine/index.js';
import { WorkerPool } from '../../engine/pool/pool.js';
import { isStreamName } from '../../engine/protocol/streams.js';
import { protocolJsonSchema } from '../../engine/wire/json-schema.js';
import {
  describeResultSchema,
  engineMessageSchema,
  eventLogRecordSchema,
  readPageSchema,
  replayedSessionSchema,
  sessionSummarySchema,
  streamNameSchema,
  subscriptionEventSchema,
  taskSchema,
  terminalResultSchema,
  workerMessageSchema,
} from '../../engine/wire/schemas.js';

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tools');

let dir: string;
let engine: Engine | undefined;

beforeEach(async () => {
  dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-wire-'));
});
afterEach(async () => {
  vi.restoreAllMocks();
  await engine?.close();
  engine = undefined;
  await fsp.rm(dir, { recursive: true, force: true });
});

/** Parses `value` and expects the result to be equal: valid, and nothing stripped or defaulted. */
function exact<S extends z.ZodType>(schema: S, value: unknown): void {
  const problem = mismatch(schema, value);
  expect(problem).toBeUndefined();
}

/** Why `value` does not validate exactly (undefined when it does); hooks on the engine's paths collect these instead of throwing there. */
function mismatch<S extends z.ZodType>(schema: S, value: unknown): string | undefined {
  const r = schema.safeParse(value);
  if (!r.success) return `${r.error.message}\n${JSON.stringify(value)?.slice(0, 500)}`;
  try {
    expect(r.data).toEqual(value);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

describe('the wire schemas match what the engine produces', () => {
  it('worker messages, tasks, events, results, records, pages, sessions and replay', async () => {
    const seen = { worker: new Set<string>(), engine: new Set<string>(), task: new Set<string>() };
    const problems: string[] = [];
    const check = <S extends z.ZodType>(schema: S, value: unknown) => {
      const p = mismatch(schema, value);
      if (p !== undefined) problems.push(p);
    };
    const onMessage = Call.prototype.onMessage;
    vi.spyOn(Call.prototype, 'onMessage').mockImplementation(function (this: Call, m, port) {
      check(workerMessageSchema, m);
      seen.worker.add(m.t);
      return onMessage.call(this, m, port);
    });
    const send = WorkerPool.prototype.send;
    vi.spyOn(WorkerPool.prototype, 'send').mockImplementation(function (this: WorkerPool, port, m) {
      check(engineMessageSchema, m);
      seen.engine.add(m.t);
      return send.call(this, port, m);
    });
    const run = WorkerPool.prototype.run;
    vi.spyOn(WorkerPool.prototype, 'run').mockImplementation(function (this: WorkerPool, task, options) {
      check(taskSchema, task);
      seen.task.add(task.kind);
      const p = run.call(this, task, options);
      if (task.kind === 'describe') void p.then((r) => check(describeResultSchema, r));
      return p;
    });

    // A policy of the host's own: bash's approval then crosses as rpc messages (the default
    // policy is known to allow spawns, and its workers do not ask).
    engine = await Engine.open({ store: join(dir, 'store'), cwd: dir, approve: () => true });
    for (const t of ['script-streams', 'script-single', 'cooperative'])
      await engine.register(join(FIXTURES, `${t}.mjs`));
    const session = { session: 'wire' };
    const events: unknown[] = [];
    const all = engine.events();
    // The engine-wide subscription never ends by itself (not even on close): stop after the 8 calls' terminal events.
    const pump = (async () => {
      let completed = 0;
      for await (const ev of all) {
        events.push(ev);
        if (ev.type === 'completed' && ++completed === 8) break;
      }
    })();

    const results = [];
    const streamed = engine.call(
      'script-streams',
      {
        // Twice the credit window on diagnostics: the worker must wait for credit, so a credit message is sent
        // whatever the timing (a small call's credit is often never sent: its completion arrives first).
        steps: [
          { stream: 'results', text: 'r\n', display: 'shown' },
          { stream: 'diagnostics', handOverBytes: 2 * 1024 * 1024 },
        ],
        finalDisplay: 'done',
        metadata: { n: 1 },
      },
      session,
    );
    const own: unknown[] = [];
    for await (const ev of streamed.events()) own.push(ev);
    results.push(await streamed.result);
    results.push(await engine.run('script-single', { full: 'all at once\n', status: 'failed', note: 'no' }, session));
    results.push(await engine.run('script-single', { steps: [{ text: 'x' }], throwMessage: 'boom' }, session));
    results.push(await engine.run('bash', { command: 'echo out; echo err >&2; exit 2' }, session));
    // A final display over liveDisplayBytes: cut, its whole sent as text messages and kept as an artifact.
    results.push(await engine.run('script-single', { finalDisplay: 'd'.repeat(100_000) }, session));
    const coop = engine.call('cooperative', { onAbort: 'throw' }, session);
    for await (const ev of coop.events()) if (ev.type === 'display') coop.cancel('stop');
    results.push(await coop.result);
    const bash = results[3];
    const manifest = bash?.output?.kind === 'streams' ? bash.output.manifest : '';
    const page = await engine.read(`artifact://${manifest}/stdout`, session);
    exact(readPageSchema, page);
    await expect(engine.read('artifact://nope', session)).rejects.toMatchObject({ code: 'EBADURI' });
    await engine.revert('wire', results[5]?.callId as string);

    expect(results.map((r) => r?.status)).toEqual(['success', 'failed', 'failed', 'failed', 'success', 'cancelled']);
    for (const r of results) exact(terminalResultSchema, r);
    for (const ev of own) exact(subscriptionEventSchema, ev);
    // The streamed call's output flowed: its first chunk always reports progress (validated above); how many
    // more follow depends on how long the call took, so only the first is asserted.
    const ownTypes = own.map((e) => (e as { type: string }).type);
    expect(ownTypes.filter((t) => t !== 'progress')).toEqual(['started', 'display', 'completed']);
    expect(ownTypes[1]).toBe('progress');
    await engine.close();
    engine = undefined;
    await pump;
    expect(events.length).toBeGreaterThan(results.length * 2);
    for (const ev of events) exact(subscriptionEventSchema, ev);

    expect(problems).toEqual([]);
    expect([...seen.worker].sort()).toEqual(['chunk', 'display', 'done', 'fail', 'proc', 'rpc', 'start', 'text']);
    expect([...seen.engine].sort()).toEqual(['abort', 'credit', 'rpc']);
    expect([...seen.task].sort()).toEqual(['call', 'describe']);

    // Every line of the session log, as written.
    const log = await fsp.readFile(join(dir, 'store', 'sessions', 'wire', 'events.log'), 'utf8');
    const records = log
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line.slice(17)) as { type: string; spill?: unknown });
    for (const rec of records) exact(eventLogRecordSchema, rec);
    const types = records.map((r) => r.type);
    expect(types.filter((t) => t === 'call.started')).toHaveLength(8);
    expect(types.filter((t) => t === 'call.completed')).toHaveLength(8);
    expect(types.at(-1)).toBe('session.revert');
    expect(records.some((r) => r.spill !== undefined)).toBe(true);

    engine = await Engine.open({ store: join(dir, 'store'), cwd: dir });
    for (const s of await engine.sessions()) exact(sessionSummarySchema, s);
    exact(replayedSessionSchema, await engine.replay('wire'));
  });
});

describe('the stream-name pattern of the JSON Schema', () => {
  it('accepts exactly the names isStreamName accepts', () => {
    const doc = protocolJsonSchema() as {
      $defs: { StreamRef: { properties: { name: { pattern: string } } } };
    };
    const pattern = new RegExp(doc.$defs.StreamRef.properties.name.pattern);
    const chars = fc.constantFrom('a', 'Z', '0', '.', '_', '-', '/', ' ', 'é', '\n', '\\', ':', '%');
    fc.assert(
      fc.property(fc.string({ unit: chars, maxLength: 70 }), (name) => {
        expect(pattern.test(name)).toBe(isStreamName(name));
        expect(streamNameSchema.safeParse(name).success).toBe(isStreamName(name));
      }),
      { numRuns: 2000 },
    );
    for (const name of ['.', '..', '...', 'a'.repeat(64), 'a'.repeat(65), '', 'std out']) {
      expect(pattern.test(name)).toBe(isStreamName(name));
    }
  });
});

describe('process groups from a worker', () => {
  it('0, 1, negative, fractional and the engine’s own pid are never signalled', async () => {
    // If this regresses, process.kill(-0) would hit the test runner's own group and -1 every process: the spy stops it.
    const kills: number[] = [];
    vi.spyOn(process, 'kill').mockImplementation((pid: number) => {
      kills.push(pid);
      return true;
    });
    engine = await Engine.open({ store: join(dir, 'store'), cwd: dir, builtins: false });
    await engine.register(join(FIXTURES, '..', 'protocol', 'bad-proc.mjs'));
    const r = await engine.run('bad-proc', { pids: [0, 1, -5, 2.5, process.pid] });
    expect([r.status, r.error]).toEqual(['success', undefined]);
    expect(kills).toEqual([]);
  });
});
