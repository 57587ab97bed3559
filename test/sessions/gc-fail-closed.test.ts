/**
 * A collection fails closed: anything it cannot read (a session directory,
 * a pin, a shard of blobs, a manifest) may hold roots, so it ends the
 * collection with EDISK naming the OS code before anything is deleted, and
 * leaves no lock, trash or tombstone behind. How it showed before: an
 * unreadable session counted as "no such session", and `sluice gc --grace 0`
 * exited 0 having deleted that session's live blobs.
 *
 * As root, permissions do not stop reads, so the collection runs as root
 * without the capabilities that bypass them (test/support/permissions.ts).
 */
import { promises as fsp } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import type { Store } from '../../store/store.js';
import { sluice, tempStore } from '../store/helpers.js';
import { permissionsRoute } from '../support/permissions.js';
import { ageStore, publishCall, snapshot } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

if ('reason' in permissionsRoute) console.log(`GC on unreadable paths not run: ${permissionsRoute.reason}`);

/** Makes `path` unreadable to the collector and runs `sluice gc --grace 0` as it. */
async function gcWithUnreadable(store: Store, path: string): Promise<{ code: number | null; stderr: string }> {
  if ('reason' in permissionsRoute) throw new Error(permissionsRoute.reason);
  await fsp.chmod(path, 0);
  try {
    return await sluice(['gc', '--grace', '0', '--store', store.root], { prefix: permissionsRoute.prefix });
  } finally {
    await fsp.chmod(path, 0o700);
  }
}

/** A store with a live session call and old garbage, everything past any grace period. */
async function storeWithRoots(): Promise<{ store: Store; live: string[] }> {
  const store = await tempStore();
  const recorder = new SessionRecorder(store);
  const { digests } = await publishCall(store, recorder, 'live', 'c1', { out: 'live out\n', err: 'live err\n' });
  await store.publishBytes('garbage\n');
  await recorder.close();
  await ageStore(store, 60 * 60 * 1000);
  return { store, live: digests };
}

async function expectFailedClosed(store: Store, before: string[], run: { code: number | null; stderr: string }) {
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(/^EDISK: .*EACCES/);
  // Nothing deleted, nothing left aside, no lock held.
  const blobs = (s: string[]) => s.filter((l) => l.startsWith('blobs/'));
  expect(blobs(await snapshot(store.root))).toEqual(blobs(before));
  expect(await fsp.readdir(store.layout.trash).catch(() => [])).toEqual([]);
  expect(await fsp.readdir(store.layout.gc).catch(() => [])).not.toContain('lock');
  expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
}

describe.runIf(!('reason' in permissionsRoute))('GC fails closed on what it cannot read', () => {
  it('a session directory it cannot read: EDISK, and the live blobs of that session stay', async () => {
    const { store } = await storeWithRoots();
    const before = await snapshot(store.root);
    const run = await gcWithUnreadable(store, dirname(eventLogPath(store.layout, 'live')));
    await expectFailedClosed(store, before, run);
  });

  it('a pin file it cannot read: EDISK', async () => {
    const { store, live } = await storeWithRoots();
    // A pin of a live process (this one) holding the call's blobs, and no session to root them.
    const pin = await store.pin(live);
    await fsp.rm(join(store.layout.sessions, 'live'), { recursive: true });
    const [journal] = await fsp.readdir(store.layout.pins);
    const before = await snapshot(store.root);
    const run = await gcWithUnreadable(store, join(store.layout.pins, journal as string));
    await expectFailedClosed(store, before, run);
    await pin.release();
  });

  it('a shard directory of blobs it cannot read: EDISK', async () => {
    const { store, live } = await storeWithRoots();
    const before = await snapshot(store.root);
    const run = await gcWithUnreadable(store, dirname(store.layout.blobPath(live[0] as string)));
    await expectFailedClosed(store, before, run);
  });

  it('a manifest it cannot read: EDISK, not "references nothing"', async () => {
    const { store, live } = await storeWithRoots();
    const before = await snapshot(store.root);
    const run = await gcWithUnreadable(store, store.layout.blobPath(live[0] as string));
    await expectFailedClosed(store, before, run);
  });
});
