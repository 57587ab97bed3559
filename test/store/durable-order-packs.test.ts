/**
 * The order of durable operations with small blobs packed, as recorded by
 * FaultyIO through a real call: each stream's digest is pinned before the
 * pack write that carries it; that write is fdatasynced (and, for a new
 * pack, packs/ fsynced) before the manifest's pack write; the terminal
 * record's fdatasync comes after the manifest's; only then is the pin
 * released. No file is created in blobs/ or tmp/.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { FaultyIO, type OpRecord } from '../support/faulty-io.js';
import { makeTempDir, removeDir, tag } from '../support/invariants.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('durable operation order with packs', () => {
  it('pin → pack write → fdatasync per stream, manifest after its streams, record fdatasync before the pin goes', async () => {
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
      const pinned = log.find((x) => x.role === 'pin' && x.op === 'write' && (x.text ?? '').includes(`+${d}`));
      expect(pinned, `pin of ${d}`).toBeDefined();
      expect((pinned as OpRecord).seq).toBeLessThan(write.seq);
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
    // The release: the journal cut to zero (nothing else held) or the drops appended.
    const released = log.find(
      (x) => x.role === 'pin' && (x.op === 'truncate' || ((x.text ?? '').includes('-') && x.op === 'write')),
    );
    expect(released).toBeDefined();
    expect((released as OpRecord).seq).toBeGreaterThan(recordSync.seq);
    // No file per output: nothing opened for creation in blobs/ or tmp/.
    expect(log.filter((x) => x.op === 'open' && (x.role === 'blob' || x.role === 'capture'))).toEqual([]);
    delete process.env.SLUICE_PACK_MAX_BLOB_BYTES;
  });
});
