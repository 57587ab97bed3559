/**
 * What GC keeps and what it takes: live session records (through their
 * manifests, transitively, to the stream blobs), the grace period and what a
 * young manifest references, deduplicated content shared by sessions, and
 * the `sluice gc` report.
 */
import { existsSync, promises as fsp } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { insideGrace } from '../../store/gc/blobs.js';
import { encodeManifest } from '../../store/manifest.js';
import { CLI, sluice, tempStore } from '../store/helpers.js';
import { closeEngines, engineWith } from '../support/engines.js';
import { age, ageStore, blobDigests, snapshot } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});
afterEach(closeEngines);

const HOUR = 60 * 60 * 1000;

describe('GC retention', () => {
  it('keeps a live call through its manifest to both streams, and takes all of it after a revert', async () => {
    const { engine } = await engineWith([]);
    // stdout passes 1 MiB, so it also gets a line-index file beside it.
    const r = await engine.run(
      'bash',
      { command: 'yes "0123456789abcdef0123456789abcdef" | head -c 1500000; echo diag >&2' },
      { session: 'life' },
    );
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const [stdout, stderr] = r.output.streams;
    const digests = [r.output.manifest, stdout?.digest, stderr?.digest].sort();
    expect(await blobDigests(engine.store)).toEqual(digests);
    expect(existsSync(engine.store.layout.indexPath(stdout?.digest as string))).toBe(true);

    // Live: even with grace 0 nothing of it goes.
    let report = await engine.gc({ graceMs: 0 });
    expect(report).toMatchObject({ scanned: 3, kept: 3, removed: 0, roots: 3 });
    await ageStore(engine.store, 2 * HOUR);
    expect((await engine.gc()).removed).toBe(0);
    expect(await blobDigests(engine.store)).toEqual(digests);

    await engine.revert('life', r.callId);
    // No longer a root, but readable by possession until collected.
    expect((await engine.read(`artifact://${r.output.manifest}/stderr`)).content).toBe('diag\n');
    report = await engine.gc();
    expect(report).toMatchObject({ scanned: 3, kept: 0, removed: 3, roots: 0, indexRemoved: 1 });
    expect(report.bytesFreed).toBe(1_500_000 + 5 + manifestBytes(r.output));
    expect(await blobDigests(engine.store)).toEqual([]);
    expect(existsSync(engine.store.layout.indexPath(stdout?.digest as string))).toBe(false);
    await expect(engine.read(`artifact://${r.output.manifest}/stdout`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('stores the same output of two sessions once; reverting one keeps it for the other', async () => {
    const { engine } = await engineWith([]);
    const a = await engine.run('bash', { command: 'echo shared' }, { session: 'a' });
    const b = await engine.run('bash', { command: 'echo shared' }, { session: 'b' });
    expect(b.output).toEqual(a.output);
    const blobs = await blobDigests(engine.store);
    // Manifest, "shared\n" and the empty stderr: one copy each.
    expect(blobs).toHaveLength(3);
    await engine.revert('a', a.callId);
    await ageStore(engine.store, 2 * HOUR);
    expect((await engine.gc()).removed).toBe(0);
    expect(await blobDigests(engine.store)).toEqual(blobs);
    expect((await engine.replay('b')).calls[0]?.result.model).toBe(b.model);
    await engine.revert('b', b.callId);
    expect((await engine.gc()).removed).toBe(3);
  });

  it('keeps blobs inside the grace period, and the streams a young manifest references', async () => {
    const store = await tempStore();
    const s1 = await store.publishBytes('stream one\n');
    const s2 = await store.publishBytes('stream two\n');
    const loose = await store.publishBytes('unreferenced\n');
    await ageStore(store, 2 * HOUR);
    // A manifest published just now (say by a call whose record is not written yet) protects its streams.
    const m = await store.publishBytes(
      encodeManifest([
        { name: 'a', digest: s1.digest, bytes: s1.bytes, lines: 1 },
        { name: 'b', digest: s2.digest, bytes: s2.bytes, lines: 1 },
      ]),
    );
    const fresh = await store.publishBytes('young and unreferenced\n');
    let report = await collectGarbage(store, { graceMs: HOUR });
    expect(report).toMatchObject({ scanned: 5, young: 2, removed: 1, kept: 4 });
    expect(await blobDigests(store)).toEqual([s1.digest, s2.digest, m.digest, fresh.digest].sort());
    expect(await store.hasBlob(loose.digest)).toBe(false);
    await age(store.layout.blobPath(m.digest), 2 * HOUR);
    report = await collectGarbage(store, { graceMs: HOUR });
    expect(report).toMatchObject({ scanned: 4, young: 1, removed: 3 });
    expect(await blobDigests(store)).toEqual([fresh.digest]);
  });

  it('holds nothing young at grace 0, even a blob whose mtime is ahead of the clock', async () => {
    // A blob written in the collector's current millisecond: its mtime has a fraction past Date.now().
    expect(insideGrace(1000, 1000.4, 0)).toBe(false);
    expect(insideGrace(1000, 1000.4, 1)).toBe(true);
    expect(insideGrace(2000, 1000, 1000)).toBe(false);
    expect(insideGrace(2000, 1000.5, 1000)).toBe(true);
    // End to end, with mtimes far enough ahead to outlast the test's own steps.
    const store = await tempStore();
    const ahead = await store.publishBytes('written ahead\n');
    await age(store.layout.blobPath(ahead.digest), -5_000);
    const aheadMore = await store.publishBytes('clock stepped back\n');
    await age(store.layout.blobPath(aheadMore.digest), -60_000);
    expect(await collectGarbage(store, { graceMs: HOUR, dryRun: true })).toMatchObject({ young: 2, removed: 0 });
    expect(await collectGarbage(store, { graceMs: 0 })).toMatchObject({ scanned: 2, young: 0, removed: 2 });
    expect(await blobDigests(store)).toEqual([]);
  });

  it('takes the artifacts of a deleted session', async () => {
    const { engine } = await engineWith([]);
    await engine.run('bash', { command: 'echo gone' }, { session: 'temp' });
    await fsp.rm(`${engine.store.layout.sessions}/temp`, { recursive: true });
    expect(await engine.sessions()).toEqual([]);
    expect((await engine.gc({ graceMs: 0 })).removed).toBe(3);
  });

  it('sluice gc reports what it scanned, kept and removed; --dry-run changes nothing', async () => {
    const { engine } = await engineWith([]);
    await engine.run('bash', { command: 'echo kept' }, { session: 'k' });
    await engine.store.publishBytes('orphan\n');
    const dir = engine.store.root;
    await ageStore(engine.store, 2 * HOUR);
    const before = await snapshot(dir);
    const dry = await sluice(['gc', '--dry-run', '--json', '--store', dir]);
    expect(dry).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(dry.stdout.toString())).toMatchObject({
      dryRun: true,
      scanned: 4,
      kept: 3,
      removed: 1,
      bytesFreed: 7,
      tmpReclaimed: 0,
      pinsReclaimed: 0,
    });
    expect(await snapshot(dir)).toEqual(before);
    const text = await sluice(['gc', '--grace', '3600', '--store', dir]);
    expect(text.code).toBe(0);
    expect(text.stdout.toString().split('\n')[0]).toBe('4 blobs scanned: 3 kept, removed 1 (7 B)');
    const again = await sluice(['gc', '--grace', '0', '--json', '--store', dir]);
    expect(JSON.parse(again.stdout.toString())).toMatchObject({ dryRun: false, graceMs: 0, scanned: 3, removed: 0 });
    const bad = await sluice(['gc', '--grace', 'soon', '--store', dir]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^EBADARGS: --grace/);
  });
});

function manifestBytes(out: {
  streams: Array<{ name: string; digest: string; bytes: number; lines: number }>;
}): number {
  return Buffer.byteLength(
    encodeManifest(out.streams.map(({ name, digest, bytes, lines }) => ({ name, digest, bytes, lines }))),
  );
}
