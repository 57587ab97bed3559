/**
 * An engine on an S3 store, end to end against a real Ceph RGW: a bash
 * call's output is captured locally, published to the bucket, and read back
 * through the built-in read tool (in a worker thread, which opens the same
 * store by its s3:// locator) by this engine and by a second engine with
 * its own local directory, as another host would.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/index.js';
import { deletePrefix } from '../store/backends.js';
import { tempDir } from '../store/helpers.js';
import { s3Service } from '../support/s3.js';

const s3 = await s3Service();

const opened: Engine[] = [];
afterEach(async () => {
  for (const e of opened.splice(0)) await e.close();
});

describe.runIf(s3)('an engine on an S3 store', () => {
  it('publishes a call output to the bucket and pages it on a second engine with another local directory', async () => {
    const cwd = await tempDir();
    const prefix = `engine-${process.pid}-${Date.now().toString(36)}`;
    const store = `s3://${s3!.bucket}/${prefix}`;
    const saved = process.env.SLUICE_STORE_LOCAL;
    try {
      process.env.SLUICE_STORE_LOCAL = join(cwd, 'host-a');
      const a = await Engine.open({ store, cwd });
      opened.push(a);
      process.env.SLUICE_STORE_LOCAL = join(cwd, 'host-b');
      const b = await Engine.open({ store, cwd });
      opened.push(b);
      expect(a.store.locator).toBe(store);
      expect(a.store.root).toBe(join(cwd, 'host-a'));
      const r = await a.run('bash', { command: 'seq 1 200000' });
      expect(r.status).toBe('success');
      const manifest = r.output?.kind === 'streams' ? r.output.manifest : '';
      expect(manifest).toMatch(/^[0-9a-f]{64}$/);
      const uri = `artifact://${manifest}/stdout`;
      expect(await a.read(uri, { offset: 199_997, limit: 10 })).toMatchObject({
        content: '199998\n199999\n200000\n',
        totalLines: 200_000,
        nextOffset: null,
      });
      expect(await b.read(uri, { offset: 1000, limit: 2 })).toMatchObject({
        content: '1001\n1002\n',
        nextOffset: 1002,
      });
      await expect(b.read(`artifact://${'c'.repeat(64)}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
      // Nothing named after the URL appeared in the working directory; capture temporaries are gone.
      expect((await fsp.readdir(cwd)).sort()).toEqual(['host-a', 'host-b']);
      expect(await fsp.readdir(join(cwd, 'host-a', 'tmp'))).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env.SLUICE_STORE_LOCAL;
      else process.env.SLUICE_STORE_LOCAL = saved;
      for (const e of opened.splice(0)) await e.close();
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    }
  });

  it('refuses a malformed S3 store with EBADOPTION before anything is created', async () => {
    const cwd = await tempDir();
    await expect(Engine.open({ store: 's3://Not_A_Bucket/p', cwd })).rejects.toMatchObject({ code: 'EBADOPTION' });
    expect(await fsp.readdir(cwd)).toEqual([]);
  });
});
