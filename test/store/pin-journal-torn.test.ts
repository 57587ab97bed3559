/**
 * A pin journal write that fails part-way (a short write, then ENOSPC)
 * leaves a torn line at the journal's end. The next append must not be
 * glued onto it: "+<half a digest>+<digest>\n" parses as no line at all, so
 * the hold it carried would be invisible to every collection while the
 * pin still holds it. Both the direct path (a pin's add) and the in-memory
 * holds a seal writes out (store/pins.ts) are checked.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scanPins } from '../../store/gc/pin-scan.js';
import { OwnerCheck } from '../../store/owners.js';
import { listPacks } from '../../store/pack-index.js';
import { Store } from '../../store/store.js';
import { FaultyIO } from '../support/faulty-io.js';
import { expectNoLeftovers, sha256, tag } from '../support/invariants.js';
import { tempDir } from './helpers.js';

/** A store packing small blobs on recording, fault-injecting I/O (its directory goes with the test). */
async function packedStore(): Promise<{ io: FaultyIO; store: Store }> {
  const root = join(await tempDir(), 'store');
  const io = new FaultyIO(root);
  return { io, store: await Store.open(root, { io, packMaxBlobBytes: 65536 }) };
}

/** What another process's collection would read as pinned. */
async function journalPins(store: Store): Promise<string[]> {
  return [...(await scanPins(store, new OwnerCheck())).digests].sort();
}

/** The next pin journal write is torn: half of it lands, then the rest fails with ENOSPC. */
function tearNextJournalWrite(io: FaultyIO): void {
  io.inject({ role: 'pin', op: 'write', errno: 'short' });
  io.inject({ role: 'pin', op: 'write', nth: 2, errno: 'ENOSPC' });
}

describe('a torn pin journal line', () => {
  it('does not swallow the hold written after it', async () => {
    const { io, store } = await packedStore();
    const keep = await store.pin();
    const lost = sha256(`lost ${tag()}`);
    const held = sha256(`held ${tag()}`);
    tearNextJournalWrite(io);
    await expect(store.pin([lost])).rejects.toMatchObject({ code: 'EDISK' });
    const pin = await store.pin([held]);
    expect(pin.digests).toEqual([held]);
    expect(await journalPins(store)).toEqual([held]);
    await pin.release();
    await keep.release();
    expect(await journalPins(store)).toEqual([]);
    await store.close();
    await expectNoLeftovers(store);
  });

  it('does not swallow the in-memory holds a later seal writes out, so no collection drops them', async () => {
    const { io, store } = await packedStore();
    const first = await store.pin();
    const a = await store.publishBytes(`first ${tag()}\n`, undefined, first);
    tearNextJournalWrite(io);
    await store.backend.packs?.writer.seal();
    const [unsealed] = await listPacks(store);
    expect(unsealed?.sealed).toBe(false);
    // Another pin keeps the journal from being cut (which would heal it) when the first goes.
    const second = await store.pin();
    await first.release();
    const b = await store.publishBytes(`second ${tag()}\n`, undefined, second);
    expect(b.deduplicated).toBe(false);
    await store.backend.packs?.writer.seal();
    const sealed = (await listPacks(store)).find((p) => p.path !== unsealed?.path);
    expect(sealed?.sealed).toBe(true);
    expect(await journalPins(store)).toEqual([b.digest]);
    // A collection (grace 0, no roots) rewrites the sealed pack and keeps what the pin holds.
    const noRoots = async () => ({
      digests: new Set<string>(),
      appended: async () => new Set<string>(),
      close: async () => {},
    });
    const report = await store.backend.collect({ roots: noRoots }, { graceMs: 0 });
    expect(report.pinned).toBe(1);
    expect(await store.hasBlob(b.digest)).toBe(true);
    // The first pack, unsealed (its owner lives), is not rewritten either.
    expect(await store.hasBlob(a.digest)).toBe(true);
    await second.release();
    expect(await journalPins(store)).toEqual([]);
    await store.close();
    await expectNoLeftovers(store);
  });
});
