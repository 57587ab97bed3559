/**
 * GC racing publications, for real: another process runs collections with a
 * grace period of 0 back to back while this one publishes hundreds of calls
 * of overlapping content (so most publishes deduplicate against blobs that
 * the collector is deleting at that moment), reverting some sessions so that
 * there is garbage to collect. No pinned or referenced blob may disappear,
 * ever: each is checked while pinned, right after its record is durable, and
 * at the end.
 */
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { verifyWithSessions } from '../../engine/sessions/verify.js';
import { encodeManifest } from '../../store/manifest.js';
import { heldPins, tempStore } from '../store/helpers.js';
import { allBlobsIntact, streamsResult, unreadable } from './helpers.js';

const GC_LOOP = fileURLToPath(new URL('../fixtures/sessions/gc-loop.mjs', import.meta.url));
const CALLS = 300;
const CONCURRENCY = 6;
const POOL = Array.from({ length: 10 }, (_, i) => `shared content ${i}\n`.repeat(i + 1));

/** A tiny deterministic PRNG, so a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 2 ** 32;
  };
}

describe('GC racing publications', () => {
  it('never deletes a pinned or referenced blob while another process collects with grace 0', async () => {
    const store = await tempStore();
    const gc = spawn(process.execPath, [GC_LOOP, store.root], { stdio: ['pipe', 'pipe', 'inherit'] });
    let gcOut = '';
    gc.stdout.on('data', (b: Buffer) => {
      gcOut += b.toString();
    });
    const exited = new Promise<number | null>((r) => gc.once('exit', (code) => r(code)));
    await new Promise<void>((r) => {
      const check = () => (gcOut.includes('ready\n') ? r() : setTimeout(check, 10));
      check();
    });

    const recorder = new SessionRecorder(store);
    const violations: string[] = [];
    const random = rng(0x5eed);
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < CALLS; i = next++) {
        const reverting = i % 4 === 0;
        const session = reverting ? `r${i % 3}` : `s${i % 5}`;
        const pick = () => POOL[Math.floor(random() * POOL.length)] as string;
        // A quarter of the calls also leave an unreferenced copy of pool content behind: instant garbage.
        if (i % 4 === 1) await store.publishBytes(pick());
        const texts = [pick(), reverting && i % 8 === 0 ? `unique ${i}\n` : pick()];
        const pin = await store.pin();
        try {
          const entries = [];
          for (const [n, text] of texts.entries()) {
            const info = await store.publishBytes(text, undefined, pin);
            entries.push({ name: `s${n}`, digest: info.digest, bytes: info.bytes, lines: info.lines });
          }
          const manifest = await store.publishBytes(encodeManifest(entries), undefined, pin);
          const digests = [manifest.digest, ...entries.map((e) => e.digest)];
          for (const d of await unreadable(store, digests)) violations.push(`call ${i}: pinned ${d} missing`);
          await recorder.completed(streamsResult(`c${i}`, session, manifest.digest, entries));
          await pin.release();
          if (reverting) {
            await recorder.revert(session, `c${i}`);
          } else {
            for (const d of await unreadable(store, digests)) violations.push(`call ${i}: referenced ${d} missing`);
          }
        } finally {
          await pin.release();
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    await recorder.close();
    gc.stdin.end();
    expect(await exited).toBe(0);
    const totals = JSON.parse(gcOut.split('\n').filter(Boolean).at(-1) as string);

    expect(violations).toEqual([]);
    // The collector really raced: it ran many times and deleted garbage while the publishers ran.
    expect(totals.runs).toBeGreaterThan(3);
    expect(totals.removed).toBeGreaterThan(0);
    const report = await verifyWithSessions(store);
    expect(report).toMatchObject({ corrupt: [], missing: [], records: [], corruptLines: 0 });
    expect(await allBlobsIntact(store)).toBe(true);
    expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
    expect(await heldPins(store.root)).toEqual([]);
  });
});
