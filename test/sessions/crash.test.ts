/**
 * Crash safety: a real child process running a call in a session is killed
 * with SIGKILL (SLUICE_CRASH_AT) after each step of a publication. After the
 * "restart" (this process opening the store): no record references a missing
 * blob, every blob's content matches its name, the session replays (the
 * killed call as interrupted unless its record made it), the dead process's
 * temporary files and pins are reclaimed, and its orphaned blobs are
 * collected once the grace period has passed, while live ones stay.
 */
import { spawn } from 'node:child_process';
import { existsSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import type { TerminalResult } from '../../engine/result.js';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { replaySession } from '../../engine/sessions/replay.js';
import { verifyWithSessions } from '../../engine/sessions/verify-references.js';
import { Store } from '../../store/store.js';
import { CLI, tempDir } from '../store/helpers.js';
import { ageStore, allBlobsIntact, blobDigests, sha256 } from './helpers.js';

const CHILD = fileURLToPath(new URL('../fixtures/sessions/crash-child.mjs', import.meta.url));
const HOUR = 60 * 60 * 1000;

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});

function runChild(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; pid: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve({ code, signal, stdout, pid: child.pid as number }));
  });
}

function outputDigests(r: TerminalResult): string[] {
  if (r.output?.kind !== 'streams') throw new Error('expected streams');
  return [r.output.manifest, ...r.output.streams.map((s) => s.digest)];
}

/**
 * Which of the killed call's blobs are placed when the process dies at each
 * step, with every blob a file and with small blobs packed (docs/store.md,
 * "Packs"). `placed: undefined`: not asserted (a pack batch written but not
 * synced may or may not be read back after a kill, and is never referenced).
 */
const STEPS: Array<{ mode: 'files' | 'packs'; step: string; placed: string[] | undefined; recorded: boolean }> = [];
for (const mode of ['files', 'packs'] as const) {
  STEPS.push(
    { mode, step: 'capture-written', placed: [], recorded: false },
    { mode, step: 'blob-renamed', placed: ['stdout'], recorded: false },
    { mode, step: 'manifest-renamed', placed: ['stdout', 'stderr', 'manifest'], recorded: false },
    { mode, step: 'record-appended', placed: ['stdout', 'stderr', 'manifest'], recorded: true },
  );
}
STEPS.push(
  { mode: 'packs', step: 'pack-written', placed: undefined, recorded: false },
  { mode: 'packs', step: 'pack-synced', placed: ['stdout'], recorded: false },
  { mode: 'packs', step: 'pack-synced:3', placed: ['stdout', 'stderr', 'manifest'], recorded: false },
);

describe('crash safety', () => {
  for (const { mode, step, placed, recorded } of STEPS) {
    it(`recovers after SIGKILL at ${step} (${mode})`, async () => {
      const packMax = mode === 'files' ? '0' : '65536';
      process.env.SLUICE_PACK_MAX_BLOB_BYTES = packMax;
      const dir = await tempDir();
      const storeDir = join(dir, 'store');
      // A call of the same session that completed before the crash: it must survive everything.
      const engine = await Engine.open({ store: storeDir, cwd: dir });
      const before = await engine.run('bash', { command: 'echo before' }, { session: 'crash' });
      await engine.close();
      const tag = step.replace(':', '-');
      const child = await runChild([storeDir, dir, tag], {
        SLUICE_CRASH_AT: step,
        SLUICE_PACK_MAX_BLOB_BYTES: packMax,
      });
      expect(child).toMatchObject({ signal: 'SIGKILL', stdout: '' });

      const store = await Store.open(storeDir);
      const dead = (await fsp.readdir(store.layout.pins)).filter((n) => n.startsWith(`${child.pid}-`));
      // The publication pin of the killed call is left behind, with the killed process's pid; with
      // packs every blob went to its own unsealed pack, pinned in memory only, so no pin file is left.
      expect(dead).toHaveLength(mode === 'files' ? 1 : 0);
      const tmpBefore = await fsp.readdir(store.layout.tmp);
      expect(tmpBefore.every((n) => n.startsWith(`${child.pid}-`))).toBe(true);
      // Captures in tmp/ are files only when blobs are: a packed blob is held in memory until it is appended.
      if (step === 'capture-written' && mode === 'files') expect(tmpBefore.length).toBeGreaterThanOrEqual(2);
      if (step === 'capture-written' && mode === 'packs') expect(tmpBefore).toEqual([]);

      // Nothing references a missing blob, and no blob is half-written.
      const report = await verifyWithSessions(store);
      expect(report).toMatchObject({ corrupt: [], missing: [], records: [], corruptLines: 0 });
      expect(await allBlobsIntact(store)).toBe(true);
      const out = `out ${tag}\n`;
      const err = `err ${tag}\n`;
      const present = await blobDigests(store);
      if (placed) {
        expect(present.includes(sha256(out))).toBe(placed.includes('stdout'));
        expect(present.includes(sha256(err))).toBe(placed.includes('stderr'));
      }

      // The session replays: the earlier call exactly, the killed one interrupted unless its record was durable.
      const replayed = await replaySession(store, 'crash');
      expect(replayed.calls.map((c) => c.callId)).toEqual([before.callId, `crash-${tag}`]);
      expect(replayed.calls[0]?.result).toEqual(before);
      expect(replayed.calls[1]?.interrupted).toBe(!recorded);
      expect(replayed.calls[1]?.result.status).toBe(recorded ? 'success' : 'failed');
      const killedRefs = recorded ? outputDigests(replayed.calls[1]?.result as TerminalResult) : [];

      // Within the grace period the orphans stay; the dead process's files go.
      const young = await collectGarbage(store);
      expect(young).toMatchObject({ removed: 0, pinsReclaimed: dead.length, tmpReclaimed: tmpBefore.length });
      expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
      expect(await fsp.readdir(store.layout.pins)).toEqual([]);

      // Past the grace period the orphans go, and only they.
      await ageStore(store, 2 * HOUR);
      const old = await collectGarbage(store);
      const live = [...outputDigests(before), ...killedRefs];
      expect(old.removed).toBe(present.filter((d) => !live.includes(d)).length);
      expect(await blobDigests(store)).toEqual([...new Set(live)].sort());
      expect((await verifyWithSessions(store)).records).toEqual([]);
    });
  }

  it('crashes nowhere when SLUICE_CRASH_AT is unset or names no step', async () => {
    const dir = await tempDir();
    const child = await runChild([join(dir, 'store'), dir, 'calm'], { SLUICE_CRASH_AT: 'nowhere' });
    expect(child).toMatchObject({ code: 0, signal: null });
    expect(JSON.parse(child.stdout)).toEqual({ survived: true, status: 'success' });
  });
});
