/**
 * The order of durable operations, as recorded by FaultyIO through a real
 * call: for each blob, its bytes are written, the file is fsynced, its digest
 * is added to the publication pin, it is renamed into place and its directory
 * is fsynced; the manifest is placed only after its stream blobs are durable;
 * the terminal record is written and fdatasynced after the manifest, and only
 * then is the pin released. A deduplicated publish pins before it refreshes
 * the existing blob's mtime.
 */
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import type { TerminalResult } from '../../engine/result.js';
import { FaultyIO, type OpRecord } from '../support/faulty-io.js';
import { makeTempDir, removeDir, tag } from '../support/invariants.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function recordedEngine(): Promise<{ engine: Engine; io: FaultyIO }> {
  const dir = await makeTempDir();
  cleanup.push(() => removeDir(dir));
  const io = new FaultyIO(join(dir, 'store'));
  const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir, io });
  cleanup.push(() => engine.close());
  return { engine, io };
}

/** Index helpers over one recorded sequence. */
function seqs(log: readonly OpRecord[]) {
  const one = (what: string, pred: (r: OpRecord) => boolean): OpRecord => {
    const found = log.filter(pred);
    expect(found.length, what).toBeGreaterThanOrEqual(1);
    return found[0] as OpRecord;
  };
  const last = (what: string, pred: (r: OpRecord) => boolean): OpRecord => {
    const found = log.filter(pred);
    expect(found.length, what).toBeGreaterThanOrEqual(1);
    return found.at(-1) as OpRecord;
  };
  return { one, last };
}

function outputBlobs(r: TerminalResult): { streams: string[]; manifest: string } {
  if (r.output?.kind !== 'streams') throw new Error(`expected streams, got ${JSON.stringify(r.output)}`);
  return { streams: r.output.streams.map((s) => s.digest), manifest: r.output.manifest };
}

describe('durable operation order', () => {
  it('write, pin → fsync → rename → fsync(dir) per blob, manifest after its streams, record fsync before the pin goes', async () => {
    const { engine, io } = await recordedEngine();
    const t = tag();
    io.clearLog();
    const r = await engine.run('bash', { command: `printf 'out ${t}\\n'; printf 'err ${t}\\n' >&2` }, { session: t });
    expect(r.status).toBe('success');
    const log = [...io.log];
    const { one, last } = seqs(log);
    const { streams, manifest } = outputBlobs(r);

    const placed = new Map<string, { rename: number; dirSync: number }>();
    for (const d of [...streams, manifest]) {
      const target = engine.store.layout.blobPath(d);
      const rename = one(`rename into ${d}`, (x) => x.op === 'rename' && x.to === target);
      expect(rename.role).toBe('capture');
      const tmp = rename.path;
      const writes = log.filter((x) => (x.op === 'write' || x.op === 'writev') && x.path === tmp);
      expect(writes.length, `writes of ${d}`).toBeGreaterThanOrEqual(1);
      const fsync = one(`fsync of ${d}`, (x) => x.op === 'fsync' && x.path === tmp);
      const pinned = one(`pin of ${d}`, (x) => x.role === 'pin' && x.op === 'write' && (x.text ?? '').includes(d));
      const dirSync = one(
        `fsync of the directory of ${d}`,
        (x) => x.op === 'fsync' && x.path === dirname(target) && x.seq > rename.seq,
      );
      for (const w of writes) expect(w.seq).toBeLessThan(fsync.seq);
      // Pinned before the store is even asked whether the blob exists, so before it can become visible.
      expect(pinned.seq).toBeLessThan(fsync.seq);
      expect(fsync.seq).toBeLessThan(rename.seq);
      expect(rename.seq).toBeLessThan(dirSync.seq);
      placed.set(d, { rename: rename.seq, dirSync: dirSync.seq });
    }
    const m = placed.get(manifest) as { rename: number; dirSync: number };
    for (const d of streams) expect((placed.get(d) as { dirSync: number }).dirSync).toBeLessThan(m.rename);

    // The started record goes first; the terminal record after the manifest is durable, fsynced, then the pin goes.
    const started = one('started record', (x) => x.role === 'log' && x.op === 'write');
    expect(started.text).toContain('"call.started"');
    expect(started.seq).toBeLessThan(Math.min(...[...placed.values()].map((p) => p.rename)));
    const completed = last('terminal record', (x) => x.role === 'log' && x.op === 'write');
    expect(completed.text ?? '').toContain('"call.completed"');
    expect(completed.seq).toBeGreaterThan(m.dirSync);
    const sync = one('record fdatasync', (x) => x.role === 'log' && x.op === 'datasync' && x.seq > completed.seq);
    // Released: the journal, holding nothing more, is cut to zero length.
    const release = one('pin release', (x) => x.role === 'pin' && x.op === 'truncate');
    expect(sync.seq).toBeLessThan(release.seq);
    // Nothing is written after the pin is released.
    expect(log.filter((x) => x.seq > release.seq && x.op !== 'open')).toEqual([]);
  });

  it('a deduplicated publish adds the digest to the pin before it refreshes the existing blob, and writes no second copy', async () => {
    const { engine, io } = await recordedEngine();
    const t = tag();
    const args = { command: `printf 'same ${t}\\n'` };
    const first = await engine.run('bash', args);
    io.clearLog();
    const second = await engine.run('bash', args, { session: t });
    expect(second.output).toEqual(first.output);
    const log = [...io.log];
    const { one } = seqs(log);
    const { streams, manifest } = outputBlobs(second);
    for (const d of [...streams, manifest]) {
      const target = engine.store.layout.blobPath(d);
      const refresh = one(`refresh of ${d}`, (x) => x.op === 'utimes' && x.path === target);
      const pinned = one(`pin of ${d}`, (x) => x.role === 'pin' && x.op === 'write' && (x.text ?? '').includes(d));
      expect(pinned.seq).toBeLessThan(refresh.seq);
      expect(log.some((x) => x.op === 'rename' && x.to === target)).toBe(false);
    }
    // Every capture file was removed (the copies were not needed).
    const captures = new Set(log.filter((x) => x.op === 'open' && x.role === 'capture').map((x) => x.path));
    for (const p of captures)
      expect(
        log.some((x) => x.op === 'unlink' && x.path === p),
        p,
      ).toBe(true);
  });
});
