/**
 * The store's cheaper I/O paths keep their guarantees: directory descriptors
 * kept open for the fsync after a rename are closed with the store; pins
 * taken at once share journal writes but each still protects its digest; a
 * long capture flushes in the background, and a failed background flush
 * fails the blob; store files behave like file handles after close.
 */
import { createHash } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { StoreFile } from '../../store/file.js';
import { parsePinJournal } from '../../store/pins.js';
import { Store } from '../../store/store.js';
import { FaultyIO, label } from '../support/faulty-io.js';
import { heldPins, sha256, tempDir, tmpEntries } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

/** Open descriptors of this process that point into `dir`. */
async function fdsUnder(dir: string): Promise<number> {
  let n = 0;
  for (const fd of await fsp.readdir('/proc/self/fd')) {
    const target = await fsp.readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target.startsWith(dir)) n++;
  }
  return n;
}

/** Waits until `check` holds (descriptors close on the thread pool, after close() returns). */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100 && !(await check()); i++) await new Promise((r) => setTimeout(r, 10));
}

describe('store I/O paths', () => {
  it('keeps one descriptor per shard directory it published into, and closes them all with the store', async () => {
    const dir = await tempDir();
    const store = await Store.open(dir);
    const digests = new Set<string>();
    for (let i = 0; i < 40; i++) digests.add((await store.publishBytes(`blob ${i}\n`)).digest);
    const shards = new Set([...digests].map((d) => d.slice(0, 2)));
    // Publishing again into the same shards opens nothing new.
    for (let i = 0; i < 40; i++) await store.publishBytes(`blob ${i}\n`);
    expect(await fdsUnder(`${dir}/blobs`)).toBe(shards.size);
    await store.close();
    await eventually(async () => (await fdsUnder(dir)) === 0);
    expect(await fdsUnder(dir)).toBe(0);
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('a failed fsync through a kept shard descriptor fails that publish with EDISK; the next one opens the shard afresh', async () => {
    const dir = await tempDir();
    const io = new FaultyIO(dir);
    const store = await Store.open(dir, { io });
    const first = await store.publishBytes('shard mate 0\n');
    // Two more contents whose digests fall in the same shard directory as the first.
    const mates: string[] = [];
    for (let i = 1; mates.length < 2; i++) {
      if (sha256(`shard mate ${i}\n`).slice(0, 2) === first.digest.slice(0, 2)) mates.push(`shard mate ${i}\n`);
    }
    const shard = `${dir}/blobs/sha256/${first.digest.slice(0, 2)}`;
    io.clearLog();
    const fault = io.inject({ op: 'fsync', role: 'blob-dir', errno: 'EIO' });
    const err = await store.publishBytes(mates[0] as string).catch((e: unknown) => e);
    io.reset();
    expect(fault.fired).toBe(1);
    expect(err).toMatchObject({ code: 'EDISK', details: { errno: 'EIO' } });
    // The descriptor was kept from the first publish: no open of the shard before the failed fsync.
    expect(io.log.filter((r) => r.path === shard).map(label)).toEqual(['fsync blob-dir']);
    io.clearLog();
    const next = await store.publishBytes(mates[1] as string);
    expect(next.digest).toBe(sha256(mates[1] as string));
    expect(io.log.filter((r) => r.path === shard).map(label)).toEqual(['open blob-dir', 'fsync blob-dir']);
    expect(await tmpEntries(store)).toEqual([]);
    await store.close();
    await eventually(async () => io.openHandles().length === 0);
    expect(io.openHandles()).toEqual([]);
  });

  it('pins taken at once share journal writes, each digest is held; releasing all empties the journal and closing removes it', async () => {
    const dir = await tempDir();
    const io = new FaultyIO(dir);
    const store = await Store.open(dir, { io });
    const digests = Array.from({ length: 40 }, (_, i) => sha256(`pin ${i}`));
    const pins = await Promise.all(digests.map((d) => store.pin([d])));
    const pinWrites = io.log.filter((r) => label(r) === 'write pin').length;
    expect(pinWrites).toBeGreaterThan(0);
    expect(pinWrites).toBeLessThan(digests.length);
    const [journal] = await fsp.readdir(store.layout.pins);
    const held = parsePinJournal(await fsp.readFile(`${store.layout.pins}/${journal}`, 'latin1'));
    expect([...held].sort()).toEqual([...digests].sort());
    await Promise.all(pins.map((p) => p.release()));
    expect(await fsp.readdir(store.layout.pins)).toEqual([journal]);
    expect((await fsp.stat(`${store.layout.pins}/${journal}`)).size).toBe(0);
    await store.close();
    expect(await fsp.readdir(store.layout.pins)).toEqual([]);
    expect(io.openHandles()).toEqual([]);
  });

  it('a pin added to and released without waiting, while the journal is busy, drops what it added', async () => {
    const dir = await tempDir();
    const store = await Store.open(dir);
    const holder = await store.pin([sha256('held by another pin')]);
    const pin = await store.pin();
    // Regression: the add and the release landed in one journal batch; the release dropped before the
    // add was counted, so the digest stayed pinned (and the journal stayed) until the process ended.
    const busy = store.pin([sha256('keeps the journal writing')]);
    const added = pin.add([sha256('added then released')]);
    const released = pin.release();
    await Promise.all([added, released, busy.then((p) => p.release())]);
    await holder.release();
    expect(await heldPins(dir)).toEqual([]);
  });

  it('closing a store file waits for an operation in flight, so its descriptor is not reused under it', async () => {
    const dir = await tempDir();
    const f = await StoreFile.open(`${dir}/f`, constants.O_CREAT | constants.O_RDWR, 0o600);
    const big = Buffer.alloc(8 * 1024 * 1024, 'w');
    const writing = f.write(big, 0, big.length, 0);
    const closing = f.close();
    expect(f.fd).toBe(-1);
    expect((await writing).bytesWritten).toBe(big.length);
    await closing;
    expect((await fsp.stat(`${dir}/f`)).size).toBe(big.length);
    expect(await fdsUnder(dir)).toBe(0);
  });

  it('a capture past 32 MiB is flushed in the background before its final fsync, and publishes the right digest', async () => {
    const dir = await tempDir();
    const io = new FaultyIO(dir);
    const store = await Store.open(dir, { io });
    const w = store.writer();
    const hash = createHash('sha256');
    const chunk = Buffer.alloc(1024 * 1024, 'background writeback\n');
    for (let i = 0; i < 40; i++) {
      hash.update(chunk);
      await w.write(chunk);
    }
    const info = await w.commit();
    expect(info).toMatchObject({ digest: hash.digest('hex'), bytes: 40 * 1024 * 1024 });
    const ops = io.log.map(label);
    const early = ops.indexOf('datasync capture');
    expect(early).toBeGreaterThan(-1);
    expect(early).toBeLessThan(ops.indexOf('fsync capture'));
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('a failed background flush fails the blob with EDISK even though the final fsync would succeed', async () => {
    const dir = await tempDir();
    const io = new FaultyIO(dir);
    io.inject({ op: 'datasync', role: 'capture', errno: 'EIO' });
    const store = await Store.open(dir, { io });
    const w = store.writer();
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    let failed: unknown;
    try {
      for (let i = 0; i < 40; i++) await w.write(chunk);
      await w.commit();
    } catch (err) {
      failed = err;
      await w.abort();
    }
    expect(failed).toMatchObject({ code: 'EDISK', details: { errno: 'EIO' } });
    expect(await tmpEntries(store)).toEqual([]);
    expect(await heldPins(dir)).toEqual([]);
    await store.close();
    expect(io.openHandles()).toEqual([]);
  });

  it('a capture of content already stored publishes without waiting for its own background flush', async () => {
    const dir = await tempDir();
    const io = new FaultyIO(dir);
    const store = await Store.open(dir, { io });
    const chunk = Buffer.alloc(1024 * 1024, 'stored already\n');
    const capture = async () => {
      const w = store.writer();
      for (let i = 0; i < 40; i++) await w.write(chunk);
      return w.commit();
    };
    const first = await capture();
    expect(first.deduplicated).toBe(false);
    // From now on a capture's fdatasync does not end until released: a copy that is never needed.
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    const held: string[] = [];
    const datasync = io.datasync;
    io.datasync = async (fh) => {
      if (io.pathOf(fh).startsWith(`${dir}/tmp/`)) {
        held.push(io.pathOf(fh));
        await released;
      }
      return datasync(fh);
    };
    const again = await capture();
    expect(again).toEqual({ ...first, deduplicated: true });
    expect(held).toHaveLength(1);
    expect(await tmpEntries(store)).toEqual([]);
    release();
    await store.close();
    await eventually(async () => io.openHandles().length === 0);
    expect(io.openHandles()).toEqual([]);
    expect(await heldPins(dir)).toEqual([]);
  });

  it('empty content creates no temporary file once the empty blob exists, and is still pinned first', async () => {
    const dir = await tempDir();
    const io = new FaultyIO(dir);
    const store = await Store.open(dir, { io });
    const empty = sha256('');
    const first = await store.publishBytes('');
    expect(first).toMatchObject({ digest: empty, bytes: 0, lines: 0, deduplicated: false });
    expect(io.log.map(label)).toContain('open capture');
    io.clearLog();
    const pin = await store.pin();
    const again = await store.writer().commit(undefined, pin);
    expect(again).toMatchObject({ digest: empty, bytes: 0, lines: 0, deduplicated: true });
    // The existing blob is opened (its content checked: a corrupt one would be replaced), then refreshed.
    expect(io.log.map(label)).toEqual(['open pin', 'write pin', 'open blob', 'utimes blob']);
    expect(pin.digests).toEqual([empty]);
    await pin.release();
    expect(await heldPins(dir)).toEqual([]);
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('a store file reports fd -1 once closed, closes twice harmlessly, and rejects use after close with EBADF', async () => {
    const dir = await tempDir();
    const f = await StoreFile.open(`${dir}/f`, constants.O_CREAT | constants.O_RDWR, 0o600);
    expect(f.fd).toBeGreaterThan(2);
    expect((await f.write(Buffer.from('abc'), 0, 3, 0)).bytesWritten).toBe(3);
    expect((await f.readFile()).toString()).toBe('abc');
    await f.close();
    expect(f.fd).toBe(-1);
    await expect(f.close()).resolves.toBeUndefined();
    await expect(f.read(Buffer.alloc(1), 0, 1, 0)).rejects.toMatchObject({ code: 'EBADF' });
    expect(await fdsUnder(dir)).toBe(0);
  });

  it('a journal compacted while pins come and go is still cut to zero once the last pin is released', async () => {
    // Regression: compaction closed the journal's descriptor and the cut that empties the journal needed
    // one, so the rewritten file kept its holds (those blobs looked pinned to GC) until the next pin.
    const dir = await tempDir();
    const store = await Store.open(dir);
    const kept = await store.pin([sha256('a'), sha256('c')]);
    for (let i = 0; i < 2100; i++) await (await store.pin([sha256('b')])).release();
    const [journal] = await fsp.readdir(store.layout.pins);
    // Compacted: a rewrite holds only the two kept digests plus what came after it, far fewer than 4200 lines.
    const text = await fsp.readFile(`${store.layout.pins}/${journal}`, 'latin1');
    expect(text.split('\n').length).toBeLessThan(1000);
    await kept.release();
    expect(await heldPins(dir)).toEqual([]);
    expect((await fsp.stat(`${store.layout.pins}/${journal}`)).size).toBe(0);
    await store.close();
    expect(await fsp.readdir(store.layout.pins)).toEqual([]);
  });

  it('a journal that cannot be cut gets the drops instead, so it still holds nothing', async () => {
    const dir = await tempDir();
    const io = new FaultyIO(dir);
    const store = await Store.open(dir, { io });
    const pin = await store.pin([sha256('x'), sha256('y')]);
    const cut = io.inject({ op: 'truncate', role: 'pin', errno: 'EIO' });
    await pin.release();
    expect(cut.fired).toBe(1);
    const [journal] = await fsp.readdir(store.layout.pins);
    expect(await fsp.readFile(`${store.layout.pins}/${journal}`, 'latin1')).toBe(
      `+${sha256('x')}\n+${sha256('y')}\n-${sha256('x')}\n-${sha256('y')}\n`,
    );
    expect(await heldPins(dir)).toEqual([]);
    await store.close();
    expect(await fsp.readdir(store.layout.pins)).toEqual([]);
    expect(io.openHandles()).toEqual([]);
  });

  it('after close a held pin refuses more digests with ECLOSED, and its release removes the journal', async () => {
    const dir = await tempDir();
    const io = new FaultyIO(dir);
    const store = await Store.open(dir, { io });
    const pin = await store.pin([sha256('held over close')]);
    await store.close();
    // Still held: the journal stays (GC honours it while this process lives), its descriptor is closed.
    expect(await heldPins(dir)).toEqual([sha256('held over close')]);
    expect(io.openHandles()).toEqual([]);
    await expect(pin.add([sha256('too late')])).rejects.toMatchObject({ code: 'ECLOSED' });
    await pin.release();
    expect(await fsp.readdir(store.layout.pins)).toEqual([]);
    expect(io.openHandles()).toEqual([]);
  });
});
