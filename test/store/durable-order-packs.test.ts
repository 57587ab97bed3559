/**
 * The order of durable operations with small blobs packed, as recorded by
 * FaultyIO through a real call: each stream's pack write is fdatasynced (and,
 * for a new pack, packs/ fsynced) before the manifest's pack write; the
 * terminal record's fdatasync comes after the manifest's. Blobs in the
 * store's own unsealed pack are pinned in memory only, so the pin journal is
 * not written at all; a seal writes the held pins to the journal first (a
 * sealed pack may be rewritten by any collection), and a journal that cannot
 * be written leaves the pack unsealed. No file is created in blobs/ or tmp/.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { scanPins } from '../../store/gc/pin-scan.js';
import { OwnerCheck } from '../../store/owners.js';
import { listPacks } from '../../store/pack-index.js';
import { Store } from '../../store/store.js';
import { FaultyIO, type OpRecord } from '../support/faulty-io.js';
import { makeTempDir, removeDir, tag } from '../support/invariants.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A store packing small blobs, on recording I/O, closed and removed after the test. */
async function packedStore(): Promise<{ io: FaultyIO; store: Store }> {
  const dir = await makeTempDir();
  cleanup.push(() => removeDir(dir));
  const root = join(dir, 'store');
  const io = new FaultyIO(root);
  const store = await Store.open(root, { io, packMaxBlobBytes: 65536 });
  cleanup.push(() => store.close());
  return { io, store };
}

/** What another process's collection would read as pinned. */
async function journalPins(store: Store): Promise<string[]> {
  return [...(await scanPins(store, new OwnerCheck())).digests].sort();
}

describe('durable operation order with packs', () => {
  it('pack write → fdatasync per stream, manifest after its streams, record after; no pin journal write', async () => {
    const dir = await makeTempDir();
    cleanup.push(() => removeDir(dir));
    const io = new FaultyIO(join(dir, 'store'));
    process.env.SLUICE_PACK_MAX_BLOB_BYTES = '65536';
    const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir, io });
    cleanup.push(() => engine.close());
    const t = tag();
    io.clearLog();
    const r = await engine.run('bash', { command: `printf 'out ${t}\\n'; printf 'err ${t}\\n' >&2` }, { session: t });
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const log: OpRecord[] = [...io.log];
    const packWrites = log.filter((x) => x.role === 'pack' && (x.op === 'write' || x.op === 'writev'));
    const packSyncs = log.filter((x) => x.role === 'pack' && x.op === 'datasync');
    // stdout, stderr and the manifest: one batch each, in that order (each waits for the one before).
    expect(packWrites).toHaveLength(3);
    expect(packSyncs).toHaveLength(3);
    const digests = [...r.output.streams.map((s) => s.digest), r.output.manifest];
    for (const [i, d] of digests.entries()) {
      const write = packWrites[i] as OpRecord;
      const sync = packSyncs[i] as OpRecord;
      expect(write.bytes, `pack write of ${d}`).toBeGreaterThan(0);
      expect(write.seq).toBeLessThan(sync.seq);
      const next = packWrites[i + 1];
      if (next) expect(sync.seq).toBeLessThan(next.seq);
    }
    // The pack's name is durable (packs/ fsynced) before the first publish returns.
    const dirSync = log.find((x) => x.op === 'fsync' && x.role === 'packs-dir');
    expect(dirSync).toBeDefined();
    expect((dirSync as OpRecord).seq).toBeLessThan((packWrites[1] as OpRecord).seq);
    const recordSync = log.filter((x) => x.role === 'log' && x.op === 'datasync').at(-1) as OpRecord;
    expect(recordSync.seq).toBeGreaterThan((packSyncs[2] as OpRecord).seq);
    // Every blob went to this store's own unsealed pack: pinned in memory, never in the journal.
    expect(log.filter((x) => x.role === 'pin')).toEqual([]);
    // No file per output: nothing opened for creation in blobs/ or tmp/.
    expect(log.filter((x) => x.op === 'open' && (x.role === 'blob' || x.role === 'capture'))).toEqual([]);
    delete process.env.SLUICE_PACK_MAX_BLOB_BYTES;
  });

  it('a seal writes the pins held in memory to the journal before the seal record', async () => {
    const { io, store } = await packedStore();
    const pin = await store.pin();
    const blob = await store.publishBytes(`in memory ${tag()}\n`, undefined, pin);
    expect(blob.deduplicated).toBe(false);
    expect(pin.digests).toEqual([blob.digest]);
    // Held in memory: another process's collection reads no pin, and may not rewrite the unsealed pack.
    expect(io.log.filter((x) => x.role === 'pin')).toEqual([]);
    io.clearLog();
    await store.backend.packs?.writer.seal();
    const log = [...io.log];
    const pinWrite = log.find((x) => x.role === 'pin' && x.op === 'write');
    const sealWrite = log.find((x) => x.role === 'pack' && x.op === 'write');
    expect(pinWrite?.text).toBe(`+${blob.digest}\n`);
    expect(sealWrite).toBeDefined();
    expect((pinWrite as OpRecord).seq).toBeLessThan((sealWrite as OpRecord).seq);
    const [pack] = await listPacks(store);
    expect(pack?.sealed).toBe(true);
    expect(await journalPins(store)).toEqual([blob.digest]);
    // The release now drops it from the journal too; nothing is left held.
    await pin.release();
    expect(await journalPins(store)).toEqual([]);
  });

  it('a journal that cannot be written leaves the pack unsealed and the pin in memory, until a seal succeeds', async () => {
    const { io, store } = await packedStore();
    const pin = await store.pin();
    const blob = await store.publishBytes(`unsealed ${tag()}\n`, undefined, pin);
    const fault = io.inject({ role: 'pin', op: 'open', errno: 'ENOSPC' });
    await store.backend.packs?.writer.seal();
    expect(fault.fired).toBe(1);
    const [first] = await listPacks(store);
    expect(first?.sealed).toBe(false);
    expect(await journalPins(store)).toEqual([]);
    // Still held in memory: the next seal (of the next pack) writes it out, then seals.
    const second = await store.publishBytes(`next ${tag()}\n`, undefined, pin);
    await store.backend.packs?.writer.seal();
    const packs = await listPacks(store);
    expect(packs.map((p) => p.sealed)).toEqual(packs.map((p) => p.path !== first?.path));
    expect(await journalPins(store)).toEqual([blob.digest, second.digest].sort());
    await pin.release();
    expect(await journalPins(store)).toEqual([]);
  });

  it('pins held only in memory are released and taken again without a journal write, however many at once', async () => {
    const { io, store } = await packedStore();
    const t = tag();
    const rounds = await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        const digests: string[] = [];
        for (let i = 0; i < 25; i++) {
          const pin = await store.pin();
          // Half of them deduplicate onto a copy appended a moment ago.
          const info = await store.publishBytes(`${t} ${(w * 25 + i) % 100}\n`, undefined, pin);
          digests.push(info.digest);
          await pin.release();
        }
        return digests;
      }),
    );
    expect(new Set(rounds.flat()).size).toBe(100);
    expect(io.log.filter((x) => x.role === 'pin')).toEqual([]);
    expect(await journalPins(store)).toEqual([]);
  });
});
