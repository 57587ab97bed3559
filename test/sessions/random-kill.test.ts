/**
 * SIGKILL at random moments: a real child process runs an Engine with a
 * long bash capture (200 MB by default) and back-to-back short publications,
 * and is killed after a random delay (seeded; the seed is in the test name).
 * After the "restart" (this process opening the store):
 *
 * - nothing referenced is lost: every live record's blobs exist, and verify
 *   finds no blob whose content differs from its name;
 * - the sessions replay: completed calls with their references, the rest as
 *   interrupted;
 * - every file the dead process left in tmp/ and pins/ is reclaimed by the
 *   next collection, and once the grace period has passed (mtimes set back)
 *   exactly the blobs no live record references are removed.
 */
import { spawn } from 'node:child_process';
import { existsSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { OutputRef } from '../../engine/result.js';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { replaySession } from '../../engine/sessions/replay.js';
import { Store } from '../../store/store.js';
import { CLI } from '../store/helpers.js';
import {
  ageBlobs,
  blobDigests,
  expectNoHalfState,
  makeTempDir,
  removeDir,
  rng,
  sleep,
  soak,
  soakTimeout,
} from '../support/invariants.js';

const CHILD = fileURLToPath(new URL('../fixtures/hardening/capture-child.mjs', import.meta.url));
const HOUR = 60 * 60 * 1000;
const BYTES = 200 * 1000 * 1000 * Math.min(soak(1), 5);
const KILLS = soak(3);
const SEED = Number(process.env.SLUICE_SEED) || Date.now() % 100_000;

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await removeDir(d);
});

/** Starts the child, waits for it to say ready, kills it `delayMs` later; resolves with its pid and how it ended. */
async function runAndKill(
  storeDir: string,
  cwd: string,
  delayMs: number,
): Promise<{ pid: number; signal: NodeJS.Signals | null; finished: boolean }> {
  const child = spawn(process.execPath, [CHILD, storeDir, cwd, String(BYTES)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
  });
  const exited = new Promise<NodeJS.Signals | null>((r) => child.once('exit', (_c, s) => r(s)));
  const deadline = Date.now() + 20_000;
  while (!out.includes('ready\n')) {
    if (Date.now() > deadline) throw new Error('the child never became ready');
    await sleep(5);
  }
  await sleep(delayMs);
  child.kill('SIGKILL');
  const signal = await exited;
  return { pid: child.pid as number, signal, finished: out.includes('done\n') };
}

function refsOf(ref: OutputRef | null): string[] {
  if (ref?.kind === 'single') return [ref.digest];
  if (ref?.kind === 'streams') return [ref.manifest, ...ref.streams.map((s) => s.digest)];
  return [];
}

describe('SIGKILL at random moments of captures and publications', () => {
  const random = rng(SEED);
  const delays = Array.from({ length: KILLS }, () => Math.floor(200 + random() * 2300 * Math.min(soak(1), 4)));
  it.each(delays.map((d, i) => [i, d]))(
    `kill #%i after %i ms (seed ${SEED}): nothing referenced lost, nothing half-written, orphans reclaimed`,
    async (_i, delayMs) => {
      const dir = await makeTempDir();
      dirs.push(dir);
      const storeDir = join(dir, 'store');
      const child = await runAndKill(storeDir, dir, delayMs);
      expect(child.signal === 'SIGKILL' || child.finished).toBe(true);

      const store = await Store.open(storeDir);
      // Whatever the dead process left behind in tmp/ and pins/ is its own.
      const tmpLeft = await fsp.readdir(store.layout.tmp);
      const pinsLeft = await fsp.readdir(store.layout.pins);
      for (const n of [...tmpLeft, ...pinsLeft]) expect(n.startsWith(`${child.pid}-`), n).toBe(true);

      // Nothing referenced is missing, nothing visible is half-written (torn log lines are allowed: skipped).
      await expectNoHalfState(store, `kill after ${delayMs} ms`, true);

      // Sessions replay; completed calls keep their references.
      const referenced = new Set<string>();
      let completed = 0;
      for (const session of ['long', 'pubs']) {
        const replayed = await replaySession(store, session).catch((e: { code?: string }) => e);
        if (!('calls' in replayed)) {
          expect(replayed.code).toBe('ENOTFOUND');
          continue;
        }
        for (const c of replayed.calls) {
          if (c.interrupted) {
            expect(c.result).toMatchObject({ status: 'failed', complete: false, output: null });
            continue;
          }
          completed++;
          expect(c.result.status).toBe('success');
          for (const d of refsOf(c.result.output)) referenced.add(d);
        }
      }
      for (const d of referenced) expect(await store.hasBlob(d), d).toBe(true);

      // Within the grace period, only the dead process's files go.
      const blobsBefore = await blobDigests(store);
      const young = await collectGarbage(store);
      expect(young).toMatchObject({ removed: 0, tmpReclaimed: tmpLeft.length, pinsReclaimed: pinsLeft.length });
      expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
      expect(await fsp.readdir(store.layout.pins)).toEqual([]);
      expect(await blobDigests(store)).toEqual(blobsBefore);

      // Past the grace period, exactly the orphans go.
      await ageBlobs(store, 2 * HOUR);
      const old = await collectGarbage(store);
      expect(await blobDigests(store)).toEqual([...referenced].sort());
      expect(old.removed).toBe(blobsBefore.length - referenced.size);
      await expectNoHalfState(store, 'after collection', true);
      // The run did something: some publications completed or some capture was under way.
      expect(completed + tmpLeft.length + blobsBefore.length).toBeGreaterThan(0);
    },
    soakTimeout(60_000),
  );
});
