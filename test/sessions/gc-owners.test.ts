/**
 * What GC does with files that belong to processes: pins and temporary files
 * of live owners are respected, those of dead owners (or of a pid that was
 * reused) reclaimed, other names never touched; the GC lock; the trash of a
 * collection that died; and conservative roots from a corrupt log line.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import { tempStore } from '../store/helpers.js';
import { age, ageStore, allBlobsIntact, blobDigests, deadPid, publishCall, snapshot } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const HOUR = 60 * 60 * 1000;
const children: ChildProcess[] = [];

/** A live process that started now (a fresh pid owner). */
async function liveChild(): Promise<number> {
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  children.push(child);
  await new Promise((r) => child.once('spawn', r));
  return child.pid as number;
}

afterEach(async () => {
  for (const c of children.splice(0)) {
    c.kill('SIGKILL');
    if (c.exitCode === null && c.signalCode === null) await new Promise((r) => c.once('exit', r));
  }
});

describe('GC and owned files', () => {
  it('keeps what a live pin holds, and takes it once the pin is released', async () => {
    const store = await tempStore();
    const blob = await store.publishBytes('pinned\n');
    const pin = await store.pin([blob.digest]);
    await ageStore(store, 2 * HOUR);
    expect(await collectGarbage(store, { graceMs: 0 })).toMatchObject({ removed: 0, pinned: 1, pinsReclaimed: 0 });
    await pin.release();
    expect(await collectGarbage(store, { graceMs: 0 })).toMatchObject({ removed: 1, pinned: 0 });
    expect(await blobDigests(store)).toEqual([]);
  });

  it('reclaims pins and temporary files of dead owners, and never touches live owners or unknown names', async () => {
    const store = await tempStore();
    const dead = await deadPid();
    const live = await liveChild();
    const held = await store.publishBytes('held by a dead pin\n');
    await fsp.writeFile(join(store.layout.pins, `${dead}-00aa.pin`), `${held.digest}\n`);
    await fsp.writeFile(join(store.layout.tmp, `${dead}-11bb.blob`), 'half a capture');
    await fsp.writeFile(join(store.layout.tmp, `${dead}-22cc.idx`), 'idx');
    await fsp.writeFile(join(store.layout.tmp, `${process.pid}-33dd.blob`), 'our own capture');
    await fsp.writeFile(join(store.layout.tmp, `${live}-44ee.blob`), 'a live capture');
    await fsp.writeFile(join(store.layout.tmp, 'notes.txt'), 'not ours to judge');
    await fsp.writeFile(join(store.layout.pins, `${live}-55ff.pin`), '');
    await ageStore(store, 2 * HOUR);
    const report = await collectGarbage(store, { graceMs: HOUR });
    // The dead pin protected nothing: its blob went, and so did the pin.
    expect(report).toMatchObject({ removed: 1, pinsReclaimed: 1, tmpReclaimed: 2, tmpBytesReclaimed: 17 });
    expect((await fsp.readdir(store.layout.tmp)).sort()).toEqual(
      [`${live}-44ee.blob`, `${process.pid}-33dd.blob`, 'notes.txt'].sort(),
    );
    expect(await fsp.readdir(store.layout.pins)).toEqual([`${live}-55ff.pin`]);
  });

  it('treats a file older than the process now holding its pid as orphaned (pid reuse)', async () => {
    const store = await tempStore();
    const live = await liveChild();
    const blob = await store.publishBytes('pinned by a previous owner of the pid\n');
    const pinPath = join(store.layout.pins, `${live}-0123.pin`);
    await fsp.writeFile(pinPath, `${blob.digest}\n`);
    const tmpPath = join(store.layout.tmp, `${live}-4567.blob`);
    await fsp.writeFile(tmpPath, 'x');
    await ageStore(store, 2 * HOUR);
    // Fresh files: the live process may own them.
    expect(await collectGarbage(store, { graceMs: HOUR })).toMatchObject({
      removed: 0,
      pinsReclaimed: 0,
      tmpReclaimed: 0,
    });
    // Written an hour before that process started: it cannot be their owner.
    await age(pinPath, HOUR);
    await age(tmpPath, HOUR);
    expect(await collectGarbage(store, { graceMs: HOUR })).toMatchObject({
      removed: 1,
      pinsReclaimed: 1,
      tmpReclaimed: 1,
    });
  });

  it('reports without changing anything in a dry run', async () => {
    const store = await tempStore();
    const dead = await deadPid();
    await store.publishBytes('old\n');
    await fsp.writeFile(join(store.layout.tmp, `${dead}-aa.blob`), 'x');
    await fsp.writeFile(join(store.layout.pins, `${dead}-bb.pin`), '');
    await ageStore(store, 2 * HOUR);
    const before = await snapshot(store.root);
    const report = await collectGarbage(store, { dryRun: true });
    expect(report).toMatchObject({ dryRun: true, removed: 1, bytesFreed: 4, tmpReclaimed: 1, pinsReclaimed: 1 });
    expect(await snapshot(store.root)).toEqual(before);
  });

  it('breaks a lock left by a dead collection, and waits for a live one (ETIMEOUT)', async () => {
    const store = await tempStore();
    const lock = join(store.layout.gc, 'lock');
    await fsp.mkdir(lock, { recursive: true });
    await fsp.writeFile(join(lock, `${await deadPid()}-0123456789ab.owner`), 'x\n');
    await store.publishBytes('old\n');
    await ageStore(store, 2 * HOUR);
    expect((await collectGarbage(store)).removed).toBe(1);
    // Neither the stale lock nor our own is left behind.
    expect((await fsp.readdir(store.layout.gc)).filter((n) => n.startsWith('lock'))).toEqual([]);
    const live = await liveChild();
    const held = `${live}-0123456789ab.owner`;
    await fsp.mkdir(lock);
    await fsp.writeFile(join(lock, held), 'x\n');
    const t0 = Date.now();
    await expect(collectGarbage(store, { lockTimeoutMs: 200 })).rejects.toMatchObject({ code: 'ETIMEOUT' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(await fsp.readdir(lock)).toEqual([held]);
    // A dry run takes no lock.
    expect((await collectGarbage(store, { dryRun: true, lockTimeoutMs: 0 })).dryRun).toBe(true);
  });

  it('restores the tombstones of a collection that died mid-sweep', async () => {
    const store = await tempStore();
    const rec = new SessionRecorder(store);
    const { digests } = await publishCall(store, rec, 's', 'c1', { out: 'live out\n', err: 'live err\n' });
    await rec.close();
    // A collection killed between its tombstone rename and its re-check left a live blob in its trash.
    const trash = join(store.layout.gc, 'trash', `${await deadPid()}-abcdef`);
    await fsp.mkdir(trash, { recursive: true });
    const victim = digests[1] as string;
    await fsp.rename(store.layout.blobPath(victim), join(trash, victim));
    await ageStore(store, 2 * HOUR);
    const report = await collectGarbage(store, { graceMs: 0 });
    expect(report).toMatchObject({ trashRecovered: 1, removed: 0, scanned: 3 });
    expect(await blobDigests(store)).toEqual([...digests].sort());
    expect(await allBlobsIntact(store)).toBe(true);
    expect(await fsp.readdir(join(store.layout.gc, 'trash'))).toEqual([]);
  });

  it('keeps the digests a corrupt log line mentions: an untrusted line cannot prove them unreferenced', async () => {
    const store = await tempStore();
    const rec = new SessionRecorder(store);
    const { digests } = await publishCall(store, rec, 's', 'c1', { out: 'o\n', err: 'e\n' });
    await rec.close();
    const log = eventLogPath(store.layout, 's');
    const buf = await fsp.readFile(log);
    // Damage the record's "callId" key, far from the digests.
    const at = buf.indexOf('"callId"') + 2;
    buf[at] = (buf[at] as number) ^ 0x20;
    await fsp.writeFile(log, buf);
    await ageStore(store, 2 * HOUR);
    expect(await collectGarbage(store, { graceMs: 0 })).toMatchObject({ removed: 0, roots: 3 });
    expect(await blobDigests(store)).toEqual([...digests].sort());
  });
});
