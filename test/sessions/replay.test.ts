/**
 * Replay parity: a session rebuilt from its event log gives back each call's
 * terminal result, with the final display and the model view byte-identical
 * to the live ones, for success, failure, a throwing tool and cancellation;
 * without running anything and without touching the store.
 */
import { existsSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TerminalResult } from '../../engine/result.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { CLI, sluice, tempDir } from '../store/helpers.js';
import {
  closeEngines,
  engineWith,
  expectStoreClean,
  uniqueSleep,
  waitForDisplay,
  waitNoProcess,
  waitProcess,
} from '../support/engines.js';
import { snapshot } from './helpers.js';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});
afterEach(closeEngines);

/** Runs the four kinds of endings in session `s` and returns their live results in order. */
async function fourEndings(): Promise<{
  engine: Awaited<ReturnType<typeof engineWith>>['engine'];
  dir: string;
  live: TerminalResult[];
}> {
  const { engine, dir } = await engineWith(['script-streams'], { toolOutput: { maxLines: 5 } });
  const live: TerminalResult[] = [];
  // Success, with a truncated stdout (so the model view carries a read hint) and display deltas.
  live.push(await engine.run('bash', { command: 'seq 1 40; echo warn >&2' }, { session: 's' }));
  // A tool-reported failure (exit code).
  live.push(await engine.run('bash', { command: 'echo partial; exit 3' }, { session: 's' }));
  // A throwing tool: failed and incomplete, with deltas and no final display of its own.
  live.push(
    await engine.run(
      'script-streams',
      {
        steps: [{ stream: 'results', text: 'r1\n', display: 'tick 1\n' }, { display: 'tick 2\n' }],
        throwMessage: 'boom',
      },
      { session: 's' },
    ),
  );
  // Cancellation while running.
  const sleeper = uniqueSleep();
  const handle = engine.call('bash', { command: `echo started; ${sleeper.command}` }, { session: 's' });
  await waitForDisplay(handle, 'started');
  expect(await waitProcess(sleeper.marker)).not.toEqual([]);
  handle.cancel('stopped by the test');
  live.push(await handle.result);
  expect(await waitNoProcess(sleeper.marker)).toEqual([]);
  expect(live.map((r) => [r.status, r.complete])).toEqual([
    ['success', true],
    ['failed', true],
    ['failed', false],
    ['cancelled', false],
  ]);
  return { engine, dir, live };
}

describe('replay', () => {
  it('rebuilds success, failure, a throwing tool and cancellation byte-identically, writing nothing', async () => {
    const { engine, live } = await fourEndings();
    const before = await snapshot(engine.store.root);
    const replayed = await engine.replay('s');
    expect(await snapshot(engine.store.root)).toEqual(before);
    expect(replayed).toMatchObject({ session: 's', reverted: 0, corruptLines: 0, skippedLines: 0 });
    expect(replayed.calls).toHaveLength(4);
    for (const [i, call] of replayed.calls.entries()) {
      const r = live[i] as TerminalResult;
      expect(call.callId).toBe(r.callId);
      expect(call.interrupted).toBe(false);
      // Exact strings first (a clearer failure), then the whole result.
      expect(call.result.display).toBe(r.display);
      expect(call.result.model).toBe(r.model);
      expect(call.result).toEqual(r);
    }
    expect(replayed.calls[0]?.args).toEqual({ command: 'seq 1 40; echo warn >&2' });
    expect(live[0]?.model).toContain('. Read more: read(filePath="artifact://');
    await expectStoreClean(engine);
  });

  it('shows the final display only: display deltas are not replayed, so never shown twice', async () => {
    const { engine } = await engineWith(['script-streams']);
    const r = await engine.run(
      'script-streams',
      {
        steps: [{ stream: 'results', text: 'x\n', display: 'delta one\n' }, { display: 'delta two\n' }],
        finalDisplay: 'all done',
      },
      { session: 'd' },
    );
    expect(r.display).toBe('all done');
    const [call] = (await engine.replay('d')).calls;
    expect(call?.result.display).toBe('all done');
    const log = await fsp.readFile(`${engine.store.layout.sessions}/d/events.log`, 'utf8');
    // The terminal record holds the final display and no delta (the start record's arguments happen to name them).
    const completed = log.split('\n').find((l) => l.includes('"call.completed"'));
    expect(completed).toContain('"display":"all done"');
    expect(completed).not.toContain('delta');
  });

  it('still replays after the artifacts are deleted; reading them then fails with ENOTFOUND', async () => {
    const { engine, live } = await fourEndings();
    await fsp.rm(engine.store.layout.blobs, { recursive: true, force: true });
    // Small outputs are packed (docs/store.md, "Packs"): their packs go too.
    await fsp.rm(engine.store.layout.packs, { recursive: true, force: true });
    const replayed = await engine.replay('s');
    expect(replayed.calls.map((c) => c.result)).toEqual(live);
    const out = live[0]?.output;
    if (out?.kind !== 'streams') throw new Error('expected streams');
    await expect(engine.store.readPage(`artifact://${out.manifest}/stdout`)).rejects.toMatchObject({
      code: 'ENOTFOUND',
    });
    await expect(engine.read(`artifact://${out.streams[0]?.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('replays a call that started but never completed as interrupted', async () => {
    const { engine } = await engineWith([]);
    const done = await engine.run('bash', { command: 'echo before' }, { session: 'i' });
    const bash = engine.tools().find((t) => t.name === 'bash');
    if (!bash) throw new Error('no bash');
    // What a process that died mid-call leaves: a start record and nothing else.
    const rec = new SessionRecorder(engine.store);
    await rec.started({
      callId: 'lost',
      tool: bash,
      args: { command: 'sleep 100' },
      session: 'i',
      at: '2030-01-01T00:00:00.000Z',
    });
    await rec.close();
    const replayed = await engine.replay('i');
    expect(replayed.calls.map((c) => c.callId)).toEqual([done.callId, 'lost']);
    const lost = replayed.calls[1];
    expect(lost).toMatchObject({ interrupted: true, args: { command: 'sleep 100' } });
    expect(lost?.result).toMatchObject({
      callId: 'lost',
      tool: 'bash',
      session: 'i',
      status: 'failed',
      complete: false,
      output: null,
      startedAt: '2030-01-01T00:00:00.000Z',
      error: { code: 'EWORKERCRASH', details: { interrupted: true } },
    });
    expect(lost?.result.display).toBe(
      'bash was interrupted: the process running it ended before the call finished, so no result was recorded',
    );
    expect(lost?.result.model).toBe(
      '[Status: failed. EWORKERCRASH: the process running the call ended before it finished; no output was recorded. Output is incomplete.]',
    );
    expect(await engine.sessions()).toMatchObject([{ id: 'i', calls: 2, interrupted: 1, reverted: 0 }]);
  });

  it('fails with ENOTFOUND for an unknown session and EBADARGS for an invalid id', async () => {
    const { engine } = await engineWith([]);
    await expect(engine.replay('nobody')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(engine.replay('../etc')).rejects.toMatchObject({ code: 'EBADARGS' });
    expect(() => engine.call('bash', { command: 'true' }, { session: 'a/b' })).toThrow(
      expect.objectContaining({ code: 'EBADARGS' }),
    );
  });

  it('replays a call recorded by `sluice run --session` with the same terminal result', async () => {
    const dir = await tempDir();
    const store = join(dir, 'store');
    const run = await sluice(
      ['run', 'bash', '--args', '{"command":"seq 1 3; exit 2"}', '--session', 'cli', '--json', '--store', store],
      { cwd: dir },
    );
    expect(run.code).toBe(1);
    const live = JSON.parse(run.stdout.toString());
    const replayed = await sluice(['replay', 'cli', '--json', '--store', store]);
    expect(replayed.code).toBe(0);
    const [call] = JSON.parse(replayed.stdout.toString()).calls;
    expect(call.result.model).toBe(live.model);
    expect(call.result.display).toBe(live.display);
    expect(call.result).toEqual(live);
  });

  it('sluice replay prints the final displays, or the model views, or the JSON that Engine.replay returns', async () => {
    const { engine, live } = await fourEndings();
    const store = engine.store.root;
    const json = await sluice(['replay', 's', '--json', '--store', store]);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(json.stdout.toString())).toEqual(JSON.parse(JSON.stringify(await engine.replay('s'))));
    const text = await sluice(['replay', 's', '--store', store]);
    expect(text.code).toBe(0);
    const out = text.stdout.toString();
    expect(out.startsWith(`── bash ${live[0]?.callId} (success)\n${live[0]?.display}\n`)).toBe(true);
    expect(out).toContain(`── bash ${live[3]?.callId} (cancelled, incomplete)\n`);
    const model = await sluice(['replay', 's', '--model', '--store', store]);
    expect(model.stdout.toString()).toContain(`${live[1]?.model}\n`);
    expect(await sluice(['replay', 'nobody', '--store', store])).toMatchObject({ code: 1 });
    const bad = await sluice(['replay', '..', '--store', store]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^EBADARGS: /);
  });
});
