/**
 * The store's reserve (store/space-reserve.ts): made by the first capture
 * file, deleted at a capture's ENOSPC, the store full for captures until the
 * cut ones have published, then made again before the next capture file;
 * a release while it is being made leaves the store full. ENOSPC is
 * injected into capture-file writes only; a real full disk is
 * test/call/full-disk.test.ts.
 */
import { promises as fsp } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { StoreFile } from '../../store/file.js';
import { realIO, type StoreIO } from '../../store/io.js';
import { RESERVE_BYTES } from '../../store/space-reserve.js';
import { Store } from '../../store/store.js';
import { fsError, heldPins, sha256, tempDir, tmpEntries } from './helpers.js';

/** Larger than the pack threshold: each writer gets a capture file. */
const CHUNK = Buffer.alloc(128 * 1024, 'x');

/** realIO whose capture-file writes fail with ENOSPC while `full()` says so, and whose reserve writes wait for `gate`. */
function faultyIO(full: () => boolean, gate?: Promise<void>): StoreIO {
  const captures = new WeakSet<StoreFile>();
  const reserves = new WeakSet<StoreFile>();
  return {
    ...realIO,
    open: async (path, flags, mode) => {
      const fh = await realIO.open(path, flags, mode);
      if (/\/tmp\/[^/]+\.blob$/.test(path)) captures.add(fh);
      if (path.endsWith('/reserve')) reserves.add(fh);
      return fh;
    },
    write: async (fh, buf, off, len, position) => {
      if (captures.has(fh) && full()) throw fsError('ENOSPC', 'write');
      if (reserves.has(fh)) await gate;
      return realIO.write(fh, buf, off, len, position);
    },
    writev: async (fh, bufs, position) => {
      if (captures.has(fh) && full()) throw fsError('ENOSPC', 'writev');
      return realIO.writev(fh, bufs, position);
    },
  };
}

async function reserveSize(store: Store): Promise<number | undefined> {
  const st = await fsp.stat(store.layout.reserve).catch(() => undefined);
  return st?.size;
}

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500 && !(await check()); i++) await new Promise((r) => setTimeout(r, 10));
  expect(await check()).toBe(true);
}

describe('the reserve', () => {
  it('the first capture file makes it: 1 MiB of allocated bytes at <root>/reserve', async () => {
    const store = await Store.open(await tempDir());
    expect(await reserveSize(store)).toBeUndefined();
    const small = store.writer();
    await small.write(Buffer.from('packed, no file\n'));
    await small.commit();
    expect(await reserveSize(store)).toBeUndefined();
    const w = store.writer();
    await w.write(CHUNK);
    await w.commit();
    await until(async () => (await reserveSize(store)) === RESERVE_BYTES);
    const st = await fsp.stat(store.layout.reserve);
    expect(st.blocks * 512).toBeGreaterThanOrEqual(RESERVE_BYTES);
    await store.close();
  });

  it('an ENOSPC deletes it; captures fail at once until the cut ones have published; then it is made again', async () => {
    let full = false;
    const store = await Store.open(await tempDir(), { io: faultyIO(() => full) });
    const a = store.writer();
    const b = store.writer();
    await a.write(CHUNK);
    await b.write(CHUNK);
    await until(async () => (await reserveSize(store)) === RESERVE_BYTES);
    full = true;
    await expect(a.write(CHUNK)).rejects.toMatchObject({ code: 'EDISK', details: { errno: 'ENOSPC' } });
    expect(await reserveSize(store)).toBeUndefined();
    // The disk has room again, but the store stays full while a cut capture has not published.
    full = false;
    await expect(b.write(CHUNK)).rejects.toMatchObject({ message: /the store is full/ });
    const c = store.writer();
    await expect(c.write(CHUNK)).rejects.toMatchObject({ message: /the store is full/ });
    expect(await reserveSize(store)).toBeUndefined();
    // Each keeps the prefix it wrote.
    const pin = await store.pin();
    const keptA = await a.commitWritten(pin, () => {});
    const keptB = await b.commitWritten(pin, () => {});
    expect(keptA).toMatchObject({ bytes: CHUNK.length, digest: sha256(CHUNK) });
    expect(keptB).toMatchObject({ bytes: CHUNK.length, digest: sha256(CHUNK) });
    await c.abort();
    await pin.release();
    // All cut captures are done: the next capture file makes the reserve first, and writes.
    const d = store.writer();
    await d.write(CHUNK);
    expect(await reserveSize(store)).toBe(RESERVE_BYTES);
    expect(await d.commit()).toMatchObject({ bytes: CHUNK.length });
    expect(await tmpEntries(store)).toEqual([]);
    expect(await heldPins(store.root)).toEqual([]);
    await store.close();
  });

  it('a release while it is being made leaves the store full until one is made after the release', async () => {
    let full = false;
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const store = await Store.open(await tempDir(), { io: faultyIO(() => full, gate) });
    const a = store.writer();
    await a.write(CHUNK);
    // The reserve's write is held at the gate; the capture's next write finds the disk full.
    full = true;
    await expect(a.write(CHUNK)).rejects.toMatchObject({ details: { errno: 'ENOSPC' } });
    open();
    full = false;
    // That make began before the release, which deleted the file it was writing: it ends nothing.
    const b = store.writer();
    await expect(b.write(CHUNK)).rejects.toMatchObject({ message: /the store is full/ });
    expect(await reserveSize(store)).toBeUndefined();
    await a.commitWritten(undefined, () => {});
    await b.abort();
    // Made after the release, once the cut captures are done: captures write again.
    const c = store.writer();
    await c.write(CHUNK);
    expect(await reserveSize(store)).toBe(RESERVE_BYTES);
    expect(await c.commit()).toMatchObject({ bytes: CHUNK.length });
    expect(await tmpEntries(store)).toEqual([]);
    await store.close();
  });
});
