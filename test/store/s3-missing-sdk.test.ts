/**
 * Without the optional AWS SDK, opening an S3 store fails with EMISSINGDEP
 * giving the install command, creating nothing, while a directory store
 * works as before (a child process in which @aws-sdk/* does not resolve).
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempDir } from './helpers.js';

const run = promisify(execFile);
const HIDE = fileURLToPath(new URL('../fixtures/store/hide-aws-sdk.mjs', import.meta.url));
const STORE = fileURLToPath(new URL('../../dist/store/store.js', import.meta.url));

describe('an S3 store without the AWS SDK', () => {
  it('fails to open with EMISSINGDEP naming @aws-sdk/client-s3 and its install command; a directory store opens', async () => {
    const dir = await tempDir();
    const script = `
      import { Store } from ${JSON.stringify(STORE)};
      const out = {};
      try { await Store.open('s3://some-bucket/p', { localDir: ${JSON.stringify(join(dir, 'local'))} }); out.s3 = 'opened'; }
      catch (e) { out.s3 = { code: e.code, details: e.details }; }
      const d = await Store.open(${JSON.stringify(join(dir, 'plain'))});
      out.dir = (await d.publishBytes('ok\\n')).bytes;
      await d.close();
      console.log(JSON.stringify(out));`;
    const { stdout } = await run(process.execPath, ['--import', HIDE, '--input-type=module', '-e', script]);
    expect(JSON.parse(stdout)).toEqual({
      s3: {
        code: 'EMISSINGDEP',
        details: {
          dependency: '@aws-sdk/client-s3',
          range: '^3.1175.0',
          install: "npm install @aws-sdk/client-s3@'^3.1175.0'",
        },
      },
      dir: 3,
    });
    expect((await fsp.readdir(dir)).sort()).toEqual(['plain']);
  });
});
