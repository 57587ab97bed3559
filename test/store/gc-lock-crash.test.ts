/**
 * A collector killed (SIGKILL, a real child process) at each step of taking
 * and releasing the GC lock: before its mkdir of the preparation, its open
 * and write of the owner file, its rename into place, the unlink and rmdir
 * of its release. Whatever it left, the next collector takes the lock (the
 * dead owner's lock broken, its preparation removed) and, once it releases,
 * nothing of either is left in gc/.
 */
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { acquireGcLock } from '../../store/gc/lock.js';
import { Store } from '../../store/store.js';
import { tempDir } from './helpers.js';

const dist = (p: string) => JSON.stringify(fileURLToPath(new URL(`../../dist/store/${p}`, import.meta.url)));

/** The collector: counts its store I/O from the lock's first step on and kills itself before the k-th. */
const COLLECTOR = `
import { writeSync } from 'node:fs';
import { Store } from ${dist('store.js')};
import { realIO } from ${dist('io.js')};
import { acquireGcLock } from ${dist('gc/lock.js')};
const k = Number(process.env.KILL_AT);
let n = 0;
let armed = false;
const io = Object.fromEntries(
  Object.entries(realIO).map(([op, f]) => [
    op,
    (...args) => {
      if (armed && ++n === k) {
        writeSync(1, op + '\\n');
        process.kill(process.pid, 'SIGKILL');
      }
      return f(...args);
    },
  ]),
);
const s = await Store.open(process.env.ROOT, { io });
armed = true;
const lock = await acquireGcLock(s, 5000);
await lock.release();
armed = false;
writeSync(1, 'done\\n');
`;

async function collectorKilledAt(root: string, k: number): Promise<{ step: string; signal: string | null }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', COLLECTOR], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ROOT: root, KILL_AT: String(k) },
  });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => {
    out += d;
  });
  const signal = await new Promise<string | null>((r) => child.once('close', (_code, sig) => r(sig)));
  return { step: out.trim(), signal };
}

/** Kills a collector at each of its steps in turn; returns the steps. */
async function killAtEachStep(): Promise<string[]> {
  const root = join(await tempDir('sluice-gc-lock-'), 'store');
  const steps: string[] = [];
  for (let k = 1; k < 60; k++) {
    const { step, signal } = await collectorKilledAt(root, k);
    if (step === 'done') break;
    expect({ k, signal }).toEqual({ k, signal: 'SIGKILL' });
    steps.push(step);
    const s = await Store.open(root);
    await (await acquireGcLock(s, 2000)).release();
    expect({ k, step, left: (await fsp.readdir(s.layout.gc)).filter((n) => n.startsWith('lock')) }).toEqual({
      k,
      step,
      left: [],
    });
    await s.close();
  }
  console.log(`killed before: ${steps.join(' ')}`);
  return steps;
}

describe('a collector killed at each step of the GC lock', () => {
  it('leaves nothing the next collector cannot clear', async () => {
    const steps = await killAtEachStep();
    // Every kind of step was a point of death, the release's two included.
    for (const op of ['mkdir', 'open', 'write', 'rename', 'unlink', 'rmdir']) expect(steps).toContain(op);
  });
});
