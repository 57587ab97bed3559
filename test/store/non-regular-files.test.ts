/**
 * A FIFO (or any file that is not a regular one) where the store expects its
 * own file: every open path opens without blocking and refuses it, blobs
 * with EINTEGRITY. How it showed before: the open of a FIFO with no writer
 * never returned, holding one of libuv's four threads, and four such reads
 * froze every later store operation of the process (this test then times
 * out instead of failing).
 */
import { execFileSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import { readBlobWhole } from '../../engine/sessions/spill.js';
import { encodeManifest } from '../../store/manifest.js';
import type { Store } from '../../store/store.js';
import { deadPid, streamsResult } from '../sessions/helpers.js';
import { closeEngines, openEngine } from '../support/engines.js';
import { sha256, tempStore } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

afterEach(closeEngines);

/** Replaces the file at `path` with a FIFO nobody writes to. */
async function fifoAt(path: string): Promise<void> {
  await fsp.mkdir(dirname(path), { recursive: true });
  await fsp.rm(path, { force: true });
  execFileSync('mkfifo', [path]);
}

/** A digest whose blob path holds a FIFO. */
async function fifoBlob(store: Store, label: string): Promise<string> {
  const digest = sha256(label);
  await fifoAt(store.layout.blobPath(digest));
  return digest;
}

describe('non-regular files in the store', () => {
  it('a FIFO at a blob address: every read path fails with EINTEGRITY at once', async () => {
    const store = await tempStore();
    const digest = await fifoBlob(store, 'fifo blob');
    await expect(store.readPage(`artifact://${digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    await expect(store.loadManifest(digest)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    await expect(readBlobWhole(store, digest)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    // A manifest whose stream is a FIFO.
    const manifest = await store.publishBytes(encodeManifest([{ name: 'out', digest, bytes: 1, lines: 1 }]));
    await expect(store.readPage(`artifact://${manifest.digest}/out`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    // verify lists it (as unexpected: not a file) without opening it.
    const report = await store.verify();
    expect(report.unexpected.some((p) => p.endsWith(digest.slice(2)))).toBe(true);
  });

  it('a FIFO among the tombstones of a dead collection: EINTEGRITY, not a hang', async () => {
    const store = await tempStore();
    const digest = sha256('tombstoned fifo');
    await fifoAt(join(store.layout.trash, `${await deadPid()}-00aa`, digest));
    await expect(store.readPage(`artifact://${digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    await expect(readBlobWhole(store, digest)).rejects.toMatchObject({ code: 'EINTEGRITY' });
  });

  it("a FIFO at a large blob's index path is ignored: the blob reads", async () => {
    const store = await tempStore();
    const text = 'a line of a large blob\n'.repeat(60_000);
    const { digest } = await store.publishBytes(text);
    await fifoAt(store.layout.indexPath(digest));
    const page = await store.readPage(`artifact://${digest}`, { offset: 50_000, limit: 2 });
    expect(page.content).toBe('a line of a large blob\n'.repeat(2));
  });

  it('FIFOs as a pin, the GC lock, a session log: GC and replay refuse or skip them without waiting', async () => {
    const store = await tempStore();
    const recorder = new SessionRecorder(store);
    const out = await store.publishBytes('out\n');
    await recorder.completed(
      streamsResult('c1', 'ok', (await store.publishBytes(encodeManifest([{ name: 'o', ...out }]))).digest, [
        { name: 'o', ...out },
      ]),
    );
    await recorder.close();
    await fifoAt(join(store.layout.pins, `${process.pid}-fifo.pin`));
    await fifoAt(eventLogPath(store.layout, 'fifo'));
    await expect(readEventLog(store, 'fifo')).rejects.toMatchObject({ code: 'EINTEGRITY' });
    // Not a session (its log is no file), not a pin: the collection completes and keeps the live call.
    const report = await collectGarbage(store, { graceMs: 0 });
    expect(report).toMatchObject({ removed: 0 });
    // Writing to it fails instead of waiting for a reader.
    const writer = new SessionRecorder(store);
    await expect(
      writer.completed(streamsResult('c2', 'fifo', sha256('m'), [{ name: 'o', ...out, digest: sha256('o') }])),
    ).rejects.toMatchObject({ code: 'EDISK' });
    await writer.close();
    // The lock: another collection waits for it like for a live one, and times out.
    await fsp.rm(eventLogPath(store.layout, 'fifo'));
    await fifoAt(join(store.layout.gc, 'lock'));
    await expect(collectGarbage(store, { graceMs: 0, lockTimeoutMs: 100 })).rejects.toMatchObject({
      code: 'ETIMEOUT',
    });
  });

  it('four artifact reads of FIFOs through an engine fail with EINTEGRITY, and the engine still serves calls', async () => {
    const { engine } = await openEngine();
    const digests = await Promise.all([1, 2, 3, 4, 5].map((i) => fifoBlob(engine.store, `fifo ${i}`)));
    const reads = await Promise.allSettled(digests.map((d) => engine.read(`artifact://${d}`)));
    for (const r of reads) expect(r).toMatchObject({ status: 'rejected', reason: { code: 'EINTEGRITY' } });
    const r = await engine.run('bash', { command: 'echo still serving' });
    expect(r.status).toBe('success');
    expect((await engine.read(`artifact://${(r.output as { manifest: string }).manifest}/stdout`)).content).toBe(
      'still serving\n',
    );
  });
});
