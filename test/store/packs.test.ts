import { execFileSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RootSource } from '../../store/gc/roots.js';
import { encodeManifest } from '../../store/manifest.js';
import { PACK_MAGIC } from '../../store/pack-format.js';
import { Store } from '../../store/store.js';
import { FaultyIO } from '../support/faulty-io.js';
import { filesUnder, fsError, ioWith, sha256, tempDir, tmpEntries } from './helpers.js';

const PACKED = { packMaxBlobBytes: 64 * 1024 };

async function packStore(dir?: string, io?: FaultyIO): Promise<Store> {
  return Store.open(dir ?? join(await tempDir(), 'store'), { ...PACKED, ...(io ? { io } : {}) });
}

/** Every name under the store, but pins/ (a journal kept open while the store is). */
async function storeFiles(store: Store): Promise<string[]> {
  return (await filesUnder(store.root)).filter((f) => !f.startsWith('pins/'));
}

async function packPaths(store: Store): Promise<string[]> {
  return (await fsp.readdir(store.layout.packs))
    .filter((n) => n.endsWith('.pack'))
    .map((n) => join(store.layout.packs, n));
}

function roots(digests: Iterable<string>): RootSource {
  const set = new Set(digests);
  return async () => ({ digests: set, appended: async () => new Set<string>(), close: async () => {} });
}

/** A closed store whose one (sealed) pack holds `content` and another blob, last modified two hours ago. */
async function inOldPack(content: string): Promise<{ store: Store; again: { digest: string } }> {
  const store = await packStore();
  const again = await store.publishBytes(content);
  await store.publishBytes('old\n');
  await store.close();
  const [pack] = await packPaths(store);
  const hoursAgo = new Date(Date.now() - 2 * 3600_000);
  await fsp.utimes(pack as string, hoursAgo, hoursAgo);
  return { store, again };
}

async function text(store: Store, digest: string): Promise<string> {
  return (await store.readPage(`artifact://${digest}`)).content;
}

describe('small blobs in packs', () => {
  it('publishes N small blobs without a file each and with far fewer syncs than publishes', async () => {
    const dir = join(await tempDir(), 'store');
    const io = new FaultyIO(dir);
    const store = await packStore(dir, io);
    await store.publishBytes('warm-up\n');
    const before = await storeFiles(store);
    io.log.length = 0;
    const N = 200;
    const infos = await Promise.all(Array.from({ length: N }, (_, i) => store.publishBytes(`small ${i}\n`)));
    const after = await storeFiles(store);
    // No new file at all: the blobs went into the pack opened for the warm-up.
    expect(after).toEqual(before);
    const syncs = io.log.filter((r) => r.op === 'fsync' || r.op === 'datasync' || r.op === 'fsyncDir');
    const creates = io.log.filter((r) => r.op === 'open' && r.path.startsWith(store.layout.blobs));
    expect(creates).toEqual([]);
    // One fdatasync per batch: at most a share of one per publish (16 publishes share one at the least here).
    expect(syncs.length).toBeLessThanOrEqual(Math.ceil(N / 16));
    expect(syncs.every((r) => r.role === 'pack')).toBe(true);
    for (const [i, info] of infos.entries()) {
      expect(info).toMatchObject({ deduplicated: false, bytes: `small ${i}\n`.length, lines: 1 });
      expect(await text(store, info.digest)).toBe(`small ${i}\n`);
    }
    expect(await tmpEntries(store)).toEqual([]);
    await store.close();
  });

  it('reads packed blobs, streams of a packed manifest and deep pages through the same URIs', async () => {
    const store = await packStore();
    const lines = Array.from({ length: 3000 }, (_, i) => `line ${i}`).join('\n');
    const a = await store.publishBytes(lines);
    const b = await store.publishBytes('');
    const m = await store.publishBytes(
      encodeManifest([
        { name: 'stdout', digest: a.digest, bytes: a.bytes, lines: a.lines },
        { name: 'stderr', digest: b.digest, bytes: 0, lines: 0 },
      ]),
    );
    expect(await storeFiles(store)).toEqual(expect.not.arrayContaining([expect.stringMatching(/^blobs\//)]));
    const page = await store.readPage(`artifact://${m.digest}/stdout`, { offset: 2500, limit: 2 });
    expect(page).toMatchObject({ content: 'line 2500\nline 2501\n', totalLines: 3000, blob: a.digest });
    expect((await store.readPage(`artifact://${m.digest}/stderr`)).content).toBe('');
    // Another store instance (another process's view) finds them from the pack index alone.
    const other = await Store.open(store.root, PACKED);
    expect(await text(other, a.digest)).toBe(`${lines.slice(0, 0)}${await text(store, a.digest)}`);
    expect(await other.verify()).toMatchObject({ scanned: 3, ok: 3, packed: 3, corrupt: [], missing: [] });
    await other.close();
    await store.close();
  });

  it('another store reads every blob of a live pack, indexed or past the index', async () => {
    const writer = await packStore();
    const infos = [];
    for (let i = 0; i < 100; i++) infos.push(await writer.publishBytes(`live ${i}\n`));
    const [idx] = (await fsp.readdir(writer.layout.packs)).filter((n) => n.endsWith('.idx'));
    // One publish per batch: 64 entries indexed, the other 36 only in the pack.
    expect((await fsp.stat(join(writer.layout.packs, idx as string))).size).toBe(8 + 64 * 48);
    const reader = await Store.open(writer.root, PACKED);
    for (const [i, info] of infos.entries()) expect(await text(reader, info.digest)).toBe(`live ${i}\n`);
    expect(await reader.verify()).toMatchObject({ packed: 100, ok: 100, corrupt: [], missing: [] });
    await reader.close();
    await writer.close();
  });

  it('deduplicates onto a packed copy, in this store and from another one', async () => {
    const store = await packStore();
    const first = await store.publishBytes('same\n');
    expect((await store.publishBytes('same\n')).deduplicated).toBe(true);
    await store.close();
    const again = await Store.open(store.root, PACKED);
    expect((await again.publishBytes('same\n')).deduplicated).toBe(true);
    expect(await text(again, first.digest)).toBe('same\n');
    await again.close();
  });

  it('deduplicates onto its own copy in the pack it appends to without touching a pack, and a sealed one is checked', async () => {
    const dir = join(await tempDir(), 'store');
    const io = new FaultyIO(dir);
    const store = await packStore(dir, io);
    const first = await store.publishBytes('own copy\n');
    io.log.length = 0;
    const again = await store.publishBytes('own copy\n');
    expect(again).toMatchObject({ digest: first.digest, deduplicated: true });
    // No I/O at all: no pin journal line (no pin here, and an own-pack copy is pinned in memory), no open, stat or read of a pack.
    expect(io.log).toEqual([]);
    expect(await text(store, first.digest)).toBe('own copy\n');
    await store.close();
    // Closing sealed that pack: another store (or this one reopened) checks the record before it trusts it.
    const io2 = new FaultyIO(dir);
    const reopened = await packStore(dir, io2);
    expect((await reopened.publishBytes('own copy\n')).deduplicated).toBe(true);
    expect(io2.log.some((r) => r.role === 'pack' && r.op === 'open')).toBe(true);
    await reopened.close();
  });

  it('never deduplicates onto a record another store has written and not yet synced', async () => {
    const dir = join(await tempDir(), 'store');
    // B's batch is written, then its fdatasync waits for the test and fails.
    let written!: () => void;
    const inSync = new Promise<void>((r) => {
      written = r;
    });
    let failSync!: () => void;
    const syncGate = new Promise<void>((r) => {
      failSync = r;
    });
    const writer = await Store.open(dir, {
      ...PACKED,
      io: ioWith({
        datasync: async () => {
          written();
          await syncGate;
          throw fsError('EIO', 'fdatasync');
        },
      }),
    });
    const reader = await packStore(dir);
    const pending = writer.publishBytes('not yet durable\n');
    const failed = expect(pending).rejects.toMatchObject({ code: 'EDISK' });
    await inSync;
    // The reader's first dedup check reads the packs, and finds the record in B's pack.
    const mine = await reader.publishBytes('not yet durable\n');
    expect(mine).toMatchObject({ digest: sha256('not yet durable\n'), deduplicated: false });
    failSync();
    await failed;
    expect(await text(reader, mine.digest)).toBe('not yet durable\n');
    // Its own copy is committed: the next publish deduplicates onto it.
    expect((await reader.publishBytes('not yet durable\n')).deduplicated).toBe(true);
    await writer.close();
    await reader.close();
    expect(await tmpEntries(reader)).toEqual([]);
  });

  it('keeps large blobs as files', async () => {
    const store = await packStore();
    const big = await store.publishBytes('x'.repeat(64 * 1024 + 1));
    expect(await store.hasBlobFile(big.digest)).toBe(true);
    const small = await store.publishBytes('x'.repeat(64 * 1024));
    expect(await store.hasBlobFile(small.digest)).toBe(false);
    expect(await store.hasBlob(small.digest)).toBe(true);
    await store.close();
  });

  it('refuses a threshold a line index would need', async () => {
    await expect(Store.open(join(await tempDir(), 's'), { packMaxBlobBytes: 1024 * 1024 })).rejects.toMatchObject({
      code: 'EBADOPTION',
    });
  });
});

describe('packs after damage', () => {
  it('a torn tail never makes a committed blob unreadable, and later publishes go to a new pack', async () => {
    const store = await packStore();
    const committed = await Promise.all(['one\n', 'two\n', 'three\n'].map((s) => store.publishBytes(s)));
    const [pack] = await packPaths(store);
    // What a SIGKILL mid-append leaves: part of a record header, then part of its content.
    await fsp.appendFile(pack as string, Buffer.concat([Buffer.from('SLPR'), Buffer.alloc(30, 7)]));
    const reader = await Store.open(store.root, PACKED);
    for (const [i, s] of ['one\n', 'two\n', 'three\n'].entries()) {
      expect(await text(reader, (committed[i] as { digest: string }).digest)).toBe(s);
    }
    expect((await reader.verify()).tornPacks).toHaveLength(1);
    const later = await reader.publishBytes('four\n');
    expect(await text(reader, later.digest)).toBe('four\n');
    expect(await packPaths(reader)).toHaveLength(2);
    await reader.close();
    await store.close();
  });

  it('rebuilds a missing, torn or garbage pack index from the pack', async () => {
    for (const damage of ['missing', 'torn', 'garbage', 'wrong-offsets'] as const) {
      const store = await packStore();
      const infos = await Promise.all(Array.from({ length: 20 }, (_, i) => store.publishBytes(`blob ${i}\n`)));
      await store.close();
      const [pack] = await packPaths(store);
      const idx = (pack as string).replace(/\.pack$/, '.idx');
      if (damage === 'missing') await fsp.unlink(idx);
      if (damage === 'torn') await fsp.truncate(idx, 8 + 48 * 5 + 17);
      if (damage === 'garbage') await fsp.writeFile(idx, Buffer.alloc(500, 0xaa));
      if (damage === 'wrong-offsets') {
        const buf = await fsp.readFile(idx);
        // Every entry points 3 bytes off: the record header check refuses them all.
        for (let at = 8; at + 48 <= buf.length; at += 48)
          buf.writeBigUInt64LE(buf.readBigUInt64LE(at + 32) + 3n, at + 32);
        await fsp.writeFile(idx, buf);
      }
      const reader = await Store.open(store.root, PACKED);
      for (const [i, info] of infos.entries()) expect(await text(reader, info.digest)).toBe(`blob ${i}\n`);
      await reader.close();
    }
  });

  it('reports a bit-flipped packed blob as corrupt and reads it as EINTEGRITY, never its bytes', async () => {
    const store = await packStore();
    const a = await store.publishBytes('precious content\n');
    await store.close();
    const [pack] = await packPaths(store);
    const buf = await fsp.readFile(pack as string);
    const at = buf.indexOf('precious');
    buf[at] = (buf[at] as number) ^ 1;
    await fsp.writeFile(pack as string, buf);
    const reader = await Store.open(store.root, PACKED);
    await expect(reader.readPage(`artifact://${a.digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    expect(await reader.verify()).toMatchObject({ corrupt: [a.digest], packed: 1 });
    // Publishing the content again adds a good copy, which reads.
    expect((await reader.publishBytes('precious content\n')).deduplicated).toBe(false);
    expect(await text(reader, a.digest)).toBe('precious content\n');
    await reader.close();
    // After a restart too, when the pack index meets the damaged copy first (its pack renamed to sort first).
    const first = join(reader.layout.packs, `${process.pid}-0.pack`);
    await fsp.rename(pack as string, first);
    await fsp.rename((pack as string).replace(/\.pack$/, '.idx'), first.replace(/\.pack$/, '.idx'));
    expect((await packPaths(reader)).sort()[0]).toBe(first);
    for (let i = 0; i < 2; i++) {
      const fresh = await Store.open(store.root, PACKED);
      expect(await text(fresh, a.digest)).toBe('precious content\n');
      expect((await fresh.readPageBytes(`artifact://${a.digest}`)).bytes.toString()).toBe('precious content\n');
      await fresh.close();
    }
  });

  it('never reads through a symbolic link or blocks on a FIFO where a pack should be', async () => {
    const store = await packStore();
    const a = await store.publishBytes('mine\n');
    await store.close();
    const [pack] = await packPaths(store);
    const elsewhere = join(await tempDir(), 'foreign.pack');
    await fsp.rename(pack as string, elsewhere);
    await fsp.symlink(elsewhere, pack as string);
    const reader = await Store.open(store.root, PACKED);
    await expect(reader.readPage(`artifact://${a.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await reader.close();
    await fsp.unlink(pack as string);
    execFileSync('mkfifo', [pack as string]);
    const again = await Store.open(store.root, PACKED);
    await expect(again.readPage(`artifact://${a.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(await again.verify()).toMatchObject({ packed: 0, corrupt: [] });
    await again.close();
  });
});

describe('pack appends under injected faults', () => {
  it('at every I/O step of a pack append: a publish that resolved reads back, one that failed left nothing behind', async () => {
    for (let nth = 1; nth <= 12; nth++) {
      for (const errno of ['EIO', 'ENOSPC', 'short']) {
        const dir = join(await tempDir(), 'store');
        const io = new FaultyIO(dir);
        const store = await packStore(dir, io);
        const fault = io.inject({ role: ['pack', 'pack-index', 'packs-dir'], nth, errno });
        const contents = Array.from({ length: 6 }, (_, i) => `blob ${i} ${errno} ${nth}\n`);
        const results = await Promise.allSettled(contents.map((c) => store.publishBytes(c)));
        // A second wave after the fault: publishing goes on (in a new pack when the old one was retired).
        const second = await Promise.allSettled(contents.map((c) => store.publishBytes(`again ${c}`)));
        // The fault may have landed in either wave (index writes are batched); a third one always follows it.
        const third = await Promise.allSettled(contents.map((c) => store.publishBytes(`after ${c}`)));
        await store.close();
        const reader = await Store.open(dir, PACKED);
        for (const [i, r] of [...results, ...second].entries()) {
          const c = i < contents.length ? contents[i] : `again ${contents[i - contents.length]}`;
          if (r.status === 'fulfilled') expect(await text(reader, r.value.digest)).toBe(c);
          else expect(r.reason).toMatchObject({ code: 'EDISK' });
        }
        expect(fault.fired).toBe(1);
        expect(third.map((r) => r.status)).toEqual(contents.map(() => 'fulfilled'));
        for (const [i, r] of third.entries()) {
          if (r.status === 'fulfilled') expect(await text(reader, r.value.digest)).toBe(`after ${contents[i]}`);
        }
        expect(await tmpEntries(reader)).toEqual([]);
        const report = await reader.verify();
        expect(report.corrupt).toEqual([]);
        await reader.close();
      }
    }
  });
});

describe('GC of packs', () => {
  it('repacks live blobs, drops the dead and the old pack, and loses nothing referenced', async () => {
    const store = await packStore();
    const live = await store.publishBytes('live\n');
    const dead = await store.publishBytes('dead\n');
    const m = await store.publishBytes(encodeManifest([{ name: 'out', digest: live.digest, bytes: 5, lines: 1 }]));
    await store.close();
    const [oldPack] = await packPaths(store);
    const gcStore = await packStore(store.root);
    const report = await gcStore.backend.collect({ roots: roots([m.digest]) }, { graceMs: 0 });
    expect(report).toMatchObject({ removed: 1, packsRemoved: 1, packedCopied: 2 });
    await expect(fsp.stat(oldPack as string)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await text(gcStore, live.digest)).toBe('live\n');
    await expect(gcStore.readPage(`artifact://${dead.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(await gcStore.verify()).toMatchObject({ missing: [], corrupt: [] });
    expect(await fsp.readdir(gcStore.layout.trash)).toEqual([]);
    await gcStore.close();
  });

  it('a publish deduplicated onto an old packed copy starts a new grace period, as one onto a file does', async () => {
    const { store, again } = await inOldPack('published again\n');
    const publisher = await packStore(store.root);
    expect((await publisher.publishBytes('published again\n')).deduplicated).toBe(true);
    const gcStore = await packStore(store.root);
    const report = await gcStore.backend.collect({ roots: roots([]) }, { graceMs: 3600_000 });
    expect(report).toMatchObject({ removed: 0, packsRemoved: 0 });
    expect(await text(gcStore, again.digest)).toBe('published again\n');
    await publisher.close();
    await gcStore.close();
    expect(await tmpEntries(gcStore)).toEqual([]);
  });

  it('a dedup onto a packed copy while a collection runs keeps it young, as a refreshed file is', async () => {
    const { store, again } = await inOldPack('deduplicated mid-collection\n');
    const publisher = await packStore(store.root);
    const gcStore = await packStore(store.root);
    let deduplicated: boolean | undefined;
    await gcStore.backend.collect(
      { roots: roots([]) },
      {
        graceMs: 3600_000,
        onStep: async (s) => {
          // After the listing saw the pack as old, before the collection moves it aside.
          if (s !== 'repacked' || deduplicated !== undefined) return;
          deduplicated = (await publisher.publishBytes('deduplicated mid-collection\n')).deduplicated;
        },
      },
    );
    expect(deduplicated).toBe(true);
    expect(await text(gcStore, again.digest)).toBe('deduplicated mid-collection\n');
    expect(await fsp.readdir(gcStore.layout.trash)).toEqual([]);
    await publisher.close();
    await gcStore.close();
  });

  it('a store that remembers a packed blob where a collection removed it finds it gone, or at its new place', async () => {
    const first = await packStore();
    const live = await first.publishBytes('moved\n');
    const dead = await first.publishBytes('dropped\n');
    await first.close();
    const reader = await packStore(first.root);
    expect(await text(reader, live.digest)).toBe('moved\n');
    expect(await reader.hasBlob(dead.digest)).toBe(true);
    const gcStore = await packStore(first.root);
    expect(await gcStore.backend.collect({ roots: roots([live.digest]) }, { graceMs: 0 })).toMatchObject({
      removed: 1,
    });
    // The reader's memory still points into the removed pack: the record header check finds it gone.
    expect(await reader.hasBlob(dead.digest)).toBe(false);
    await expect(reader.readPage(`artifact://${dead.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(await text(reader, live.digest)).toBe('moved\n');
    expect(await reader.hasBlob(live.digest)).toBe(true);
    await gcStore.close();
    await reader.close();
  });

  it('leaves the unsealed pack of another live store alone, and seals its own before collecting', async () => {
    const store = await packStore();
    const dead = await store.publishBytes('not referenced\n');
    const collector = await packStore(store.root);
    const own = await collector.publishBytes("the collector's own\n");
    const report = await collector.backend.collect({ roots: roots([]) }, { graceMs: 0 });
    // The other store's pack is still being appended to; the collector's own was sealed and rewritten.
    expect(report).toMatchObject({ removed: 1, packsRemoved: 1 });
    expect(await text(store, dead.digest)).toBe('not referenced\n');
    await expect(collector.readPage(`artifact://${own.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    // Publishing goes on in a new pack.
    expect(await text(collector, (await collector.publishBytes('after\n')).digest)).toBe('after\n');
    await collector.close();
    await store.close();
  });

  it('keeps a packed blob a publisher deduplicates onto at any step of the collection', async () => {
    const steps = [
      'listed',
      'pins',
      'roots',
      'marked',
      'repacked',
      'tombstone',
      'recheck',
      'relisted',
      'unlink',
    ] as const;
    for (const at of steps) {
      const first = await packStore();
      const target = await first.publishBytes(`wanted at ${at}\n`);
      await first.publishBytes(`garbage at ${at}\n`);
      await first.close();
      const gcStore = await packStore(first.root);
      const publisher = await packStore(first.root);
      let pin: Awaited<ReturnType<Store['pin']>> | undefined;
      let deduped: boolean | undefined;
      await gcStore.backend.collect(
        { roots: roots([]) },
        {
          graceMs: 0,
          onStep: async (s) => {
            if (s !== at || pin) return;
            pin = await publisher.pin();
            deduped = (await publisher.publishBytes(`wanted at ${at}\n`, undefined, pin)).deduplicated;
          },
        },
      );
      expect(deduped, at).toBeDefined();
      // Referenced by the pin now: readable from a fresh view of the store, whatever the step was.
      const reader = await packStore(first.root);
      expect(await text(reader, target.digest), at).toBe(`wanted at ${at}\n`);
      await pin?.release();
      await reader.close();
      await publisher.close();
      await gcStore.close();
    }
  });

  it('at every I/O step of a repack under faults: nothing referenced is lost, and the next collection finishes the job', async () => {
    for (let nth = 1; nth <= 30; nth++) {
      const first = await packStore();
      const live = await Promise.all(Array.from({ length: 5 }, (_, i) => first.publishBytes(`live ${i}\n`)));
      await Promise.all(Array.from({ length: 5 }, (_, i) => first.publishBytes(`dead ${i}\n`)));
      await first.close();
      const io = new FaultyIO(first.root);
      const gcStore = await packStore(first.root, io);
      io.inject({ role: ['pack', 'pack-index', 'packs-dir', 'trash'], nth, errno: 'EIO' });
      const keep = live.map((l) => l.digest);
      await gcStore.backend.collect({ roots: roots(keep) }, { graceMs: 0 }).catch((err) => {
        expect(err).toMatchObject({ code: 'EDISK' });
      });
      await gcStore.close();
      const reader = await packStore(first.root);
      for (const [i, l] of live.entries()) expect(await text(reader, l.digest), `nth ${nth}`).toBe(`live ${i}\n`);
      const again = await reader.backend.collect({ roots: roots(keep) }, { graceMs: 0 });
      expect(again.removed).toBeGreaterThanOrEqual(0);
      for (const [i, l] of live.entries()) expect(await text(reader, l.digest), `nth ${nth}`).toBe(`live ${i}\n`);
      expect(await fsp.readdir(reader.layout.trash)).toEqual([]);
      await reader.close();
    }
  });
});

describe('SIGKILL during pack appends and repacks', () => {
  const child = (dir: string, script: string, crashAt: string) => {
    try {
      execFileSync(process.execPath, ['--input-type=module', '-e', script, dir], {
        env: { ...process.env, SLUICE_CRASH_AT: crashAt, SLUICE_PACK_MAX_BLOB_BYTES: '65536' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      return { killed: false, out: '' };
    } catch (err) {
      const e = err as { signal?: string; stdout?: Buffer };
      return { killed: e.signal === 'SIGKILL', out: e.stdout?.toString() ?? '' };
    }
  };
  const storeJs = new URL('../../dist/store/store.js', import.meta.url).href;

  it('mid-group-commit: every publish that returned reads back after the kill', async () => {
    for (const crashAt of ['pack-written:1', 'pack-written:3', 'pack-synced:2', 'pack-synced:4']) {
      const dir = join(await tempDir(), 'store');
      const script = `
        import { Store } from '${storeJs}';
        const store = await Store.open(process.argv[1]);
        for (let wave = 0; wave < 4; wave++) {
          await Promise.all(Array.from({ length: 10 }, async (_, k) => {
            const i = wave * 10 + k;
            const info = await store.publishBytes('kill ' + i + '\\n');
            process.stdout.write(i + ' ' + info.digest + '\\n');
          }));
        }
        await store.close();`;
      const r = child(dir, script, crashAt);
      expect(r.killed, crashAt).toBe(true);
      const reader = await packStore(dir);
      const returned = r.out.split('\n').filter(Boolean);
      for (const line of returned) {
        const [i, digest] = line.split(' ');
        expect(await text(reader, digest as string)).toBe(`kill ${i}\n`);
      }
      expect((await reader.verify()).corrupt).toEqual([]);
      await reader.close();
    }
  });

  it('past the batched pack index: every publish that returned reads back after the kill', async () => {
    // One publish per batch: the index is written after the 64th entry, so the last 35 are found by scanning.
    const dir = join(await tempDir(), 'store');
    const script = `
      import { Store } from '${storeJs}';
      const store = await Store.open(process.argv[1]);
      for (let i = 0; i < 120; i++) {
        const info = await store.publishBytes('indexed ' + i + '\\n');
        process.stdout.write(i + ' ' + info.digest + '\\n');
      }
      await store.close();`;
    const r = child(dir, script, 'pack-synced:100');
    expect(r.killed).toBe(true);
    const returned = r.out.split('\n').filter(Boolean);
    expect(returned).toHaveLength(99);
    const [idx] = (await fsp.readdir(join(dir, 'packs'))).filter((n) => n.endsWith('.idx'));
    expect((await fsp.stat(join(dir, 'packs', idx as string))).size).toBe(8 + 64 * 48);
    const reader = await packStore(dir);
    for (const line of returned) {
      const [i, digest] = line.split(' ');
      expect(await text(reader, digest as string)).toBe(`indexed ${i}\n`);
    }
    expect(await reader.verify()).toMatchObject({ packed: 100, corrupt: [], missing: [] });
    await reader.close();
  });

  it('mid-repack: the live blobs survive and the next collection restores and finishes', async () => {
    for (const crashAt of ['repack-copied', 'repack-tombstoned']) {
      const first = await packStore();
      const live = await Promise.all(Array.from({ length: 4 }, (_, i) => first.publishBytes(`live ${i}\n`)));
      const dead = await first.publishBytes('dead\n');
      await first.close();
      const keep = JSON.stringify(live.map((l) => l.digest));
      const script = `
        import { Store } from '${storeJs}';
        const store = await Store.open(process.argv[1]);
        const digests = new Set(${keep});
        await store.backend.collect({ roots: async () => ({ digests, appended: async () => new Set(), close: async () => {} }) }, { graceMs: 0 });`;
      const r = child(first.root, script, crashAt);
      expect(r.killed, crashAt).toBe(true);
      const reader = await packStore(first.root);
      for (const [i, l] of live.entries()) expect(await text(reader, l.digest), crashAt).toBe(`live ${i}\n`);
      const report = await reader.backend.collect({ roots: roots(live.map((l) => l.digest)) }, { graceMs: 0 });
      expect(report.trashRecovered, crashAt).toBe(crashAt === 'repack-tombstoned' ? 1 : 0);
      for (const [i, l] of live.entries()) expect(await text(reader, l.digest), crashAt).toBe(`live ${i}\n`);
      await expect(reader.readPage(`artifact://${dead.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
      expect(await fsp.readdir(reader.layout.trash)).toEqual([]);
      await reader.close();
    }
  });
});

describe('pack format', () => {
  it('every pack starts with its magic and holds each blob once per append', async () => {
    const store = await packStore();
    await store.publishBytes('a\n');
    await store.publishBytes('a\n');
    await store.close();
    const [pack] = await packPaths(store);
    const buf = await fsp.readFile(pack as string);
    expect(buf.subarray(0, 8).equals(PACK_MAGIC)).toBe(true);
    expect(buf.toString('latin1').split('a\n').length - 1).toBe(1);
    expect(sha256('a\n')).toMatch(/^[0-9a-f]{64}$/);
  });
});
