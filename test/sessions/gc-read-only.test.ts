/**
 * A collection on a store it cannot write says why: EDISK with EROFS (exit
 * 1), nothing changed. How it showed before: `ENOENT: mkdir …/gc`, since
 * Node's recursive mkdir reports ENOENT when it cannot create the last
 * directory. Needs a read-only bind mount (root); skipped with the reason
 * otherwise.
 */
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { sluice, tempStore } from '../store/helpers.js';
import { ageStore, publishCall, snapshot } from './helpers.js';
import { bindReadOnly } from './mounts.js';

/** Whether a read-only bind mount can be made here (it needs root): probed once while the file is collected. */
const probeDir = await fsp.mkdtemp(join(tmpdir(), 'sluice-ro-probe-'));
const probe = await bindReadOnly(probeDir);
if ('reason' in probe) console.log(`GC on a read-only store not run: ${probe.reason}`);
else await probe.unmount();
await fsp.rmdir(probeDir);

describe('GC on a read-only store', () => {
  it.runIf(!('reason' in probe))(
    'fails with EDISK naming EROFS and changes nothing; verify still reads it',
    async () => {
      const store = await tempStore();
      const recorder = new SessionRecorder(store);
      await publishCall(store, recorder, 'ro', 'c1', { out: 'out\n', err: 'err\n' });
      await store.publishBytes('garbage\n');
      await recorder.close();
      await ageStore(store, 60 * 60 * 1000);
      const view = await bindReadOnly(store.root);
      if ('reason' in view) throw new Error(`the probe could bind-mount, this could not: ${view.reason}`);
      try {
        const before = await snapshot(view.dir);
        const gc = await sluice(['gc', '--grace', '0', '--store', view.dir]);
        expect(gc.code).toBe(1);
        expect(gc.stderr).toMatch(/^EDISK: EROFS/);
        expect(await snapshot(view.dir)).toEqual(before);
        const verify = await sluice(['verify', '--json', '--store', view.dir]);
        expect(verify.code).toBe(0);
        expect(JSON.parse(verify.stdout.toString())).toMatchObject({ corrupt: [], missing: [], records: [] });
      } finally {
        await view.unmount();
      }
    },
  );
});
