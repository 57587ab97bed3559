/**
 * Verify after a collection killed mid-sweep: blobs of live records that lie
 * among its tombstones are reported `tombstoned` (readable, put back by the
 * next collection), not missing; the next collection restores them and
 * verify is clean. How it showed before: `records` listed the live call's
 * blobs as missing while they sat in the trash.
 */
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { verifyWithSessions } from '../../engine/sessions/verify-references.js';
import { Store } from '../../store/store.js';
import { sluice, tempDir } from '../store/helpers.js';
import { unreadable } from './helpers.js';

const KILLED = fileURLToPath(new URL('../fixtures/sessions/gc-killed.mjs', import.meta.url));

describe('verify and the tombstones of a killed collection', () => {
  // With packs, the collection moves the whole pack holding both blobs aside: one tombstone, two blobs.
  for (const { mode, aside } of [
    { mode: 'files', aside: 2 },
    { mode: 'packs', aside: 1 },
  ] as const)
    it(`reports live blobs aside as tombstoned, not missing; the next collection puts them back (${mode})`, async () => {
      const packMax = mode === 'files' ? '0' : '65536';
      process.env.SLUICE_PACK_MAX_BLOB_BYTES = packMax;
      const dir = `${await tempDir()}/store`;
      const child = spawn(process.execPath, [KILLED, dir], {
        stdio: 'inherit',
        env: { ...process.env, SLUICE_PACK_MAX_BLOB_BYTES: packMax },
      });
      expect(await new Promise((r) => child.once('exit', (_c, signal) => r(signal)))).toBe('SIGKILL');
      const store = await Store.open(dir);
      const report = await verifyWithSessions(store);
      expect(report).toMatchObject({ corrupt: [], missing: [], records: [] });
      expect(report.tombstoned).toHaveLength(2);
      // Readers find them where they are.
      expect(await unreadable(store, report.tombstoned)).toEqual([]);
      const cli = await sluice(['verify', '--store', dir]);
      expect(cli.code).toBe(0);
      expect(cli.stdout.toString()).toMatch(/^tombstoned [0-9a-f]{64} /m);

      const gc = await collectGarbage(store, { graceMs: 0 });
      expect(gc.trashRecovered).toBe(aside);
      expect(gc.removed).toBe(0);
      expect(await verifyWithSessions(store)).toMatchObject({ corrupt: [], missing: [], tombstoned: [], records: [] });
      expect(await fsp.readdir(store.layout.trash)).toEqual([]);
      await store.close();
    });
});
