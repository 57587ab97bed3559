/**
 * File modes do not depend on the umask: with a umask of 0 (so any path
 * created with default permissions would show 0666 or 0777), every
 * directory the store creates is 0700 and every file 0600: blobs, line
 * indexes, pins while held, session logs, spill blobs, GC's lock and
 * tombstone directories, and the server's token.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { loadOrCreateToken } from '../../server/auth.js';
import { ageBlobs, makeTempDir, removeDir } from '../support/invariants.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

let dir: string;
let oldMask: number;
beforeEach(async () => {
  dir = await makeTempDir('sluice-modes-');
  oldMask = process.umask(0);
});
afterEach(async () => {
  process.umask(oldMask);
  await removeDir(dir);
});

/** `mode path` of everything under `root` whose permission bits are not `dirs` (directories) or `files`. */
async function wrongModes(root: string, dirs = 0o700, files = 0o600): Promise<string[]> {
  const out: string[] = [];
  const check = async (p: string) => {
    const st = await fsp.lstat(p);
    const want = st.isDirectory() ? dirs : files;
    if ((st.mode & 0o777) !== want) out.push(`${(st.mode & 0o777).toString(8)} ${p.slice(root.length) || '/'}`);
  };
  await check(root);
  for (const e of await fsp.readdir(root, { withFileTypes: true, recursive: true }))
    await check(join(e.parentPath, e.name));
  return out.sort();
}

describe('file modes under umask 0', () => {
  it('every directory the store creates is 0700 and every file 0600', async () => {
    const storeDir = join(dir, 'store');
    const engine = await Engine.open({ store: storeDir, cwd: dir });
    try {
      // Named streams in a session, a large output (gets a line index), large arguments (a spill blob).
      await engine.run('bash', { command: 'echo out; echo err >&2' }, { session: 's1' });
      await engine.run('bash', { command: 'yes 0123456789abcdef | head -c 3000000' }, { session: 's1' });
      await engine.run('bash', { command: `true ${'z'.repeat(70_000)}` }, { session: 's2' });
      // A pin while it is held, and an orphan so that GC tombstones something.
      const pin = await engine.store.pin([]);
      await engine.store.publishBytes('orphan\n', undefined, pin);
      expect(await wrongModes(storeDir)).toEqual([]);
      await pin.release();
      await ageBlobs(engine.store, 2 * 60 * 60 * 1000);
      let sawTrash: string[] | undefined;
      const report = await collectGarbage(engine.store, {
        onStep: async (s) => {
          if (s === 'recheck') sawTrash = await wrongModes(engine.store.layout.gc);
        },
      });
      expect(report.removed).toBeGreaterThan(0);
      expect(sawTrash).toEqual([]);
      const token = await loadOrCreateToken(storeDir);
      expect(token.created).toBe(true);
      expect(await wrongModes(storeDir)).toEqual([]);
    } finally {
      await engine.close();
    }
  });
});
