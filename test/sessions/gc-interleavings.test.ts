/**
 * Interleavings that lost data, forced through the collector's step hook
 * (each reproduced a loss before the fix; each says how it shows if it
 * returns):
 *
 * - a deduplicating publisher that pins, refreshes, records and releases
 *   between the collector's session scan and its re-check, with the refresh
 *   on the listing's timestamp tick: the blob looked unchanged and a live
 *   record's stream was unlinked (verify: `records` lists it);
 * - a manifest placed after its shard was listed was never a candidate and
 *   survived while its listed streams were deleted (verify: `missing`);
 * - the same with the manifest re-placed at its address after the collector
 *   had moved it aside.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { collectGarbage, type GcStep } from '../../engine/sessions/gc.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { verifyWithSessions } from '../../engine/sessions/verify-references.js';
import { realIO, type StoreIO } from '../../store/io.js';
import { encodeManifest } from '../../store/manifest.js';
import { type Pin, Store } from '../../store/store.js';
import { heldPins, tempDir } from '../store/helpers.js';
import { ageStore, allBlobsIntact, publishCall, unreadable } from './helpers.js';

/**
 * The real filesystem, except that a refresh leaves the mtime where it was:
 * what a refresh within the listing's timestamp tick looks like (the same
 * millisecond, or the same second on a filesystem with 1-second timestamps).
 * It still fails with ENOENT when the blob is not there, as utimes does.
 */
const sameTickIO: StoreIO = {
  ...realIO,
  utimes: async (path) => {
    await fsp.stat(path);
  },
};

async function openStore(io: StoreIO = realIO, packMaxBlobBytes?: number): Promise<Store> {
  return Store.open(`${await tempDir('sluice-gci-')}/store`, {
    io,
    ...(packMaxBlobBytes === undefined ? {} : { packMaxBlobBytes }),
  });
}

/** Runs `fn` once, the first time the collection reaches `at`. */
function at(at: GcStep, fn: () => Promise<void>): (s: GcStep) => Promise<void> {
  let done = false;
  return async (s) => {
    if (s !== at || done) return;
    done = true;
    await fn();
  };
}

async function expectIntact(store: Store): Promise<void> {
  const report = await verifyWithSessions(store);
  expect(report).toMatchObject({ corrupt: [], missing: [], records: [] });
  expect(await allBlobsIntact(store)).toBe(true);
  expect(await heldPins(store.root)).toEqual([]);
  expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
  expect(await fsp.readdir(store.layout.trash).catch(() => [])).toEqual([]);
}

describe('GC under forced interleavings', () => {
  for (const when of ['roots', 'marked', 'recheck'] as const) {
    it(`keeps blobs a publisher refreshed on the listing's tick and recorded before the re-check (at ${when})`, async () => {
      const store = await openStore(sameTickIO);
      const recorder = new SessionRecorder(store);
      // Orphans with the content the publisher is about to publish: garbage at the listing.
      for (const t of ['out\n', 'err\n']) await store.publishBytes(t);
      let digests: string[] = [];
      const report = await collectGarbage(store, {
        graceMs: 0,
        onStep: at(when, async () => {
          ({ digests } = await publishCall(store, recorder, 's', 'c1', { out: 'out\n', err: 'err\n' }));
        }),
      });
      await recorder.close();
      expect(digests).toHaveLength(3);
      expect(await unreadable(store, digests)).toEqual([]);
      // At the re-check the blobs are already aside: the publisher placed copies and the tombstones went.
      if (when !== 'recheck') expect(report.removed).toBe(0);
      await expectIntact(store);
    });
  }

  it('keeps the streams of a manifest placed after its shard was listed', async () => {
    const store = await openStore(sameTickIO);
    const recorder = new SessionRecorder(store);
    await publishCall(store, recorder, 'old', 'first', { out: 'shared out\n', err: 'shared err\n' });
    await recorder.revert('old', 'first');
    await ageStore(store, 60_000);
    // After the listing: a call of a reverted session (not a root) publishes the same streams under
    // a new manifest, and a sessionless pin is released at once. Nothing protects the streams but
    // the manifest, which the listing never saw.
    let manifest = '';
    await collectGarbage(store, {
      graceMs: 0,
      onStep: at('listed', async () => {
        const pin = await store.pin();
        const entries = [];
        for (const [name, text] of [
          ['a', 'shared out\n'],
          ['b', 'shared err\n'],
        ] as const) {
          const info = await store.publishBytes(text, undefined, pin);
          entries.push({ name, digest: info.digest, bytes: info.bytes, lines: info.lines });
        }
        manifest = (await store.publishBytes(encodeManifest(entries), undefined, pin)).digest;
        await pin.release();
      }),
    });
    await recorder.close();
    const present = (await unreadable(store, [manifest])).length === 0;
    // Either the manifest went with its streams, or everything it references is still there.
    if (present) expect((await verifyWithSessions(store)).missing).toEqual([]);
    await expectIntact(store);
  });

  for (const mode of ['files', 'packs'] as const)
    it(`keeps the streams of a manifest a publisher placed again after the collector moved it aside (${mode})`, async () => {
      // With packs the manifest's whole pack is moved aside, and its copy placed again goes into a new pack.
      const store = await openStore(sameTickIO, mode === 'files' ? 0 : 64 * 1024);
      const texts = ['again out\n', 'again err\n'];
      const entries = [];
      for (const [i, text] of texts.entries()) {
        const info = await store.publishBytes(text);
        entries.push({ name: `s${i}`, digest: info.digest, bytes: info.bytes, lines: info.lines });
      }
      const body = encodeManifest(entries);
      const manifest = (await store.publishBytes(body)).digest;
      // A pack is rewritten only once sealed: as this store's own, it is sealed by the collection itself.
      await ageStore(store, 60_000);
      // A sessionless publisher: its streams are refreshed in place before the collector moves any
      // blob aside; its manifest, once moved aside, is placed again (its refresh finds nothing); then
      // its pin goes, before the re-check.
      let pin: Pin | undefined;
      let placed = false;
      const inTrash = async (d: string) => {
        for (const dir of await fsp.readdir(store.layout.trash).catch(() => [] as string[])) {
          const names = await fsp.readdir(join(store.layout.trash, dir));
          if (names.includes(d) || (mode === 'packs' && names.some((n) => n.endsWith('.pack')))) return true;
        }
        return false;
      };
      await collectGarbage(store, {
        graceMs: 0,
        onStep: async (s) => {
          if (s !== 'tombstone' && s !== 'recheck') return;
          if (!pin) {
            pin = await store.pin();
            for (const t of texts) expect((await store.publishBytes(t, undefined, pin)).deduplicated).toBe(true);
          }
          if (!placed && (await inTrash(manifest))) {
            placed = true;
            expect((await store.publishBytes(body, undefined, pin)).deduplicated).toBe(false);
            await pin.release();
          }
        },
      });
      expect(placed).toBe(true);
      if ((await unreadable(store, [manifest])).length === 0)
        expect((await verifyWithSessions(store)).missing).toEqual([]);
      await expectIntact(store);
    });
});
