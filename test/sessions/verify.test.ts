/**
 * Verify with sessions: live records that reference missing blobs are listed
 * (by session, call, digest and role), by Engine.verify and `sluice verify`;
 * reverted calls are not, since GC may take their artifacts.
 */
import { existsSync, promises as fsp } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLI, sluice } from '../store/helpers.js';
import { closeEngines, engineWith } from '../support/engines.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});
afterEach(closeEngines);

describe('verify with sessions', () => {
  it('lists live records that reference missing blobs, in the API and the CLI', async () => {
    const { engine } = await engineWith([]);
    const r = await engine.run('bash', { command: 'echo will vanish; echo kept >&2' }, { session: 'v' });
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const stdout = r.output.streams[0]?.digest as string;
    expect((await engine.verify()).records).toEqual([]);
    await fsp.unlink(engine.store.layout.blobPath(stdout));
    const report = await engine.verify();
    expect(report.records).toEqual([{ session: 'v', callId: r.callId, digest: stdout, role: 'stream' }]);
    // The store's own check sees it too, through the manifest.
    expect(report.missing).toEqual([stdout]);
    expect(report.corrupt).toEqual([]);

    const cli = await sluice(['verify', '--store', engine.store.root]);
    expect(cli.code).toBe(1);
    expect(cli.stdout.toString()).toContain(`record v/${r.callId} references missing stream ${stdout}\n`);
    const json = await sluice(['verify', '--json', '--store', engine.store.root]);
    expect(JSON.parse(json.stdout.toString())).toMatchObject({ records: report.records, corruptLines: 0 });

    // A reverted call's artifacts may be collected: not an error.
    await fsp.unlink(engine.store.layout.blobPath(r.output.manifest));
    await engine.revert('v', r.callId);
    expect((await engine.verify()).records).toEqual([]);
  });
});
