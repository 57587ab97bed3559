/**
 * GC against publishers under a fast-check scheduler: every step of a
 * publication (pin add, blob rename or mtime refresh, durable record, pin
 * release), every step of a collection (listing, pins, roots, mark,
 * tombstone renames, re-check, unlink) and a revert are scheduled points, and
 * fast-check explores their interleavings. With a grace period of 0 and
 * orphaned copies of the very content being published, no pinned or
 * referenced blob may ever be missing. Half the runs refresh blobs without
 * changing their mtime (a refresh on the listing's timestamp tick, as on a
 * filesystem with 1-second timestamps): the collector's safety must not
 * rest on timestamps.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { verifyWithSessions } from '../../engine/sessions/verify-references.js';
import { realIO, type StoreIO } from '../../store/io.js';
import { encodeManifest } from '../../store/manifest.js';
import { type Pin, Store } from '../../store/store.js';
import { heldPins, tempDir } from '../store/helpers.js';
import { ageStore, allBlobsIntact, streamsResult, unreadable } from './helpers.js';

const POOL = ['alpha\n', 'beta\n', 'gamma\n', 'delta\n'];
const fastIO: StoreIO = { ...realIO, fsync: async () => {}, fsyncDir: async () => {} };

/**
 * Runs `actors` to the end, letting fast-check choose which one takes its
 * next step. Before each choice every unfinished actor is given (real) time
 * to reach its next scheduled point: the actors do real I/O between points,
 * and without this barrier the one that happens to be fastest would always
 * be the only candidate, hiding most interleavings.
 */
async function drive(s: fc.Scheduler, actors: Array<() => Promise<void>>): Promise<void> {
  let unfinished = actors.length;
  const all = Promise.all(
    actors.map((a) =>
      a().finally(() => {
        unfinished--;
      }),
    ),
  );
  all.catch(() => {});
  while (unfinished > 0) {
    const deadline = Date.now() + 10_000;
    // Each actor is sequential: at most one pending step each.
    while (unfinished > 0 && s.count() < unfinished) {
      if (Date.now() > deadline) throw new Error(`stuck: ${unfinished} actors, ${s.count()} pending steps`);
      await new Promise((r) => setImmediate(r));
    }
    if (unfinished === 0) break;
    await s.waitNext(1);
  }
  await all;
}

describe('GC and publication interleavings (fast-check scheduler)', () => {
  it('never loses a pinned or referenced blob, whatever the order of the steps', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        // Each call: two pool entries, and whether it is recorded (a sessionless call is protected by
        // its pin only, so with grace 0 it may be collected whole, but never a manifest without its streams).
        fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 }), fc.boolean()), {
          minLength: 1,
          maxLength: 3,
        }),
        fc.boolean(),
        fc.boolean(),
        async (s, calls, revertFirst, sameTick) => {
          const dir = join(await tempDir('sluice-fc-'), 'store');
          // Setup on the real filesystem: a live call holding alpha/beta, and an orphaned copy of every pool entry.
          // fsync is irrelevant to interleavings and costs most of the time: skipped in this test.
          const plain = await Store.open(dir, { io: fastIO });
          const setupRec = new SessionRecorder(plain);
          const seed = await Promise.all(POOL.map((t) => plain.publishBytes(t)));
          const e0 = seed[0] as { digest: string; bytes: number; lines: number };
          const e1 = seed[1] as { digest: string; bytes: number; lines: number };
          const entries0 = [
            { name: 'a', digest: e0.digest, bytes: e0.bytes, lines: e0.lines },
            { name: 'b', digest: e1.digest, bytes: e1.bytes, lines: e1.lines },
          ];
          const m0 = await plain.publishBytes(encodeManifest(entries0));
          await setupRec.completed(streamsResult('first', 'old', m0.digest, entries0));
          await setupRec.close();
          await ageStore(plain, 60_000);

          // The run: the same store through scheduled filesystem steps.
          const step = (label: string) => s.schedule(Promise.resolve(label), label);
          const io: StoreIO = {
            ...fastIO,
            rename: async (a, b) => {
              await step(`rename ${b.slice(-8)}`);
              return realIO.rename(a, b);
            },
            unlink: async (p) => {
              await step(`unlink ${p.slice(-8)}`);
              return realIO.unlink(p);
            },
            utimes: async (p, at, mt) => {
              await step(`utimes ${p.slice(-8)}`);
              // Same tick: the mtime stays as the listing saw it (a missing blob still fails with ENOENT).
              if (sameTick) await fsp.stat(p);
              else await realIO.utimes(p, at, mt);
            },
          };
          const store = await Store.open(dir, { io });
          const recorder = new SessionRecorder(store);
          const violations: string[] = [];

          const publish = async (i: number, texts: [number, number], recorded: boolean) => {
            const raw = await store.pin();
            const pin: Pin = {
              get digests() {
                return raw.digests;
              },
              add: async (ds) => {
                await step(`pin.add ${i}`);
                return raw.add(ds);
              },
              release: async () => {
                await step(`release ${i}`);
                return raw.release();
              },
              vouch: () => raw.vouch(),
            };
            try {
              const entries = [];
              for (const [n, t] of texts.entries()) {
                const info = await store.publishBytes(POOL[t] as string, undefined, pin);
                entries.push({ name: `s${n}`, digest: info.digest, bytes: info.bytes, lines: info.lines });
              }
              const manifest = await store.publishBytes(encodeManifest(entries), undefined, pin);
              const digests = [manifest.digest, ...entries.map((e) => e.digest)];
              for (const d of await unreadable(store, digests)) violations.push(`publisher ${i}: pinned ${d} missing`);
              if (!recorded) return;
              await step(`record ${i}`);
              await recorder.completed(streamsResult(`p${i}`, `p${i}`, manifest.digest, entries));
              await pin.release();
              for (const d of await unreadable(store, digests))
                violations.push(`publisher ${i}: referenced ${d} missing`);
            } finally {
              await raw.release();
            }
          };
          const revert = async () => {
            await step('revert');
            await recorder.revert('old', 'first');
          };
          const gc = async () => {
            await collectGarbage(store, {
              graceMs: 0,
              onStep: async (name) => {
                await step(`gc ${name}`);
              },
            });
          };
          const actors = [
            ...calls.map(
              ([a, b, recorded], i) =>
                () =>
                  publish(i, [a, b], recorded),
            ),
            gc,
            ...(revertFirst ? [revert] : []),
          ];
          await drive(s, actors);
          await recorder.close();

          expect(violations).toEqual([]);
          const report = await verifyWithSessions(plain);
          expect(report.records).toEqual([]);
          expect(report.corrupt).toEqual([]);
          // No manifest outlives one of its streams.
          expect(report.missing).toEqual([]);
          expect(await allBlobsIntact(plain)).toBe(true);
          expect(await heldPins(plain.root)).toEqual([]);
          expect(await fsp.readdir(plain.layout.tmp)).toEqual([]);
          // Every tombstone was either restored or deleted.
          expect(await fsp.readdir(plain.layout.trash).catch(() => [])).toEqual([]);
        },
      ),
      { numRuns: 40 },
    );
  });
});
