import { promises as fsp } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ABSENT,
  blobCount,
  codeOf,
  expectNoLeaks,
  flipBit,
  openFixture,
  type ReadFixture,
} from '../support/read-fixture.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

async function bashManifest(f: ReadFixture, command = 'echo out; echo err >&2') {
  const r = await f.engine.run('bash', { command });
  if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
  return r.output;
}

/**
 * Malformed artifact URIs, as functions of a real manifest digest `d` (so a
 * lenient parser would find something to read). None may parse, and none may
 * be tried as a path.
 */
const MALFORMED: Array<[string, (d: string) => string]> = [
  ['scheme only', () => 'artifact://'],
  ['short digest', () => 'artifact://abc'],
  ['63 hex characters', (d) => `artifact://${d.slice(0, 63)}`],
  ['65 hex characters', (d) => `artifact://${d}0`],
  ['uppercase digest', (d) => `artifact://${d.toUpperCase()}`],
  ['non-hex digest', () => `artifact://${'g'.repeat(64)}`],
  ['uppercase scheme', (d) => `ARTIFACT://${d}`],
  ['mixed-case scheme', (d) => `Artifact://${d}/stdout`],
  ['no slashes', (d) => `artifact:${d}`],
  ['one slash', (d) => `artifact:/${d}`],
  ['three slashes', (d) => `artifact:///${d}`],
  ['internal reference form', (d) => `artifact://sha256/${d}`],
  ['empty stream segment', (d) => `artifact://${d}/`],
  ['double slash before the stream', (d) => `artifact://${d}//stdout`],
  ['trailing slash after the stream', (d) => `artifact://${d}/stdout/`],
  ['extra path segment', (d) => `artifact://${d}/stdout/extra`],
  ['dot stream', (d) => `artifact://${d}/.`],
  ['dot-dot stream', (d) => `artifact://${d}/..`],
  ['traversal', (d) => `artifact://${d}/../../etc/passwd`],
  ['query', (d) => `artifact://${d}?offset=3`],
  ['fragment', (d) => `artifact://${d}#stdout`],
  ['query after the stream', (d) => `artifact://${d}/stdout?x=1`],
  ['percent-escape', (d) => `artifact://${d}/std%6Fut`],
  ['space in the stream', (d) => `artifact://${d}/std out`],
  ['newline after the stream', (d) => `artifact://${d}/stdout\n`],
  ['backslash separator', (d) => `artifact://${d}\\stdout`],
  ['stream name over 64 bytes', (d) => `artifact://${d}/${'s'.repeat(65)}`],
  ['leading whitespace', (d) => `  artifact://${d}`],
];

describe('malformed artifact URIs', () => {
  it(`fail with EBADURI for all ${MALFORMED.length} forms and never touch the filesystem`, async () => {
    expect(MALFORMED.length).toBeGreaterThanOrEqual(20);
    const f = await openFixture();
    const { manifest } = await bashManifest(f);
    f.ops.length = 0;

    // Decoys: files (or directories, where another form needs one) literally at the paths these
    // strings would name if they fell back to the filesystem. Read, any of them would succeed.
    const paths = MALFORMED.map(([, make]) => resolve(f.cwd, make(manifest))).filter((p) => p.startsWith(`${f.cwd}/`));
    let decoys = 0;
    for (const p of new Set(paths)) {
      if (paths.some((q) => q.startsWith(`${p}/`))) await fsp.mkdir(p, { recursive: true });
      else {
        await fsp.mkdir(dirname(p), { recursive: true });
        await fsp.writeFile(p, 'DECOY\n');
      }
      decoys++;
    }
    expect(decoys).toBeGreaterThanOrEqual(20);

    const blobs = await blobCount(f.storeDir);
    for (const [label, make] of MALFORMED) {
      const filePath = make(manifest);
      const r = await f.engine.run('read', { filePath });
      expect({ label, status: r.status, code: r.error?.code }).toEqual({ label, status: 'failed', code: 'EBADURI' });
      expect(r.model).not.toContain('DECOY');
      expect({ label, code: await codeOf(f.engine.read(filePath)) }).toEqual({ label, code: 'EBADURI' });
    }
    // The approval policy was never even asked: prepare failed before any operation existed.
    expect(f.ops).toEqual([]);
    expect(await blobCount(f.storeDir)).toBe(blobs);
    await expectNoLeaks(f.storeDir);
  });

  it('a file whose name merely contains artifact:// elsewhere is an ordinary file', async () => {
    const f = await openFixture();
    await fsp.mkdir(join(f.cwd, 'notes'));
    await fsp.writeFile(join(f.cwd, 'notes', 'see artifact:x.txt'), 'plain\n');
    expect(await f.engine.read('notes/see artifact:x.txt')).toMatchObject({ content: '     1\tplain\n' });
    expect(f.ops).toEqual([
      expect.objectContaining({ kind: 'fs.read', realPath: join(f.cwd, 'notes', 'see artifact:x.txt') }),
    ]);
  });
});

describe('artifact read errors are ordinary failed results', () => {
  it('an unknown stream is EUNKNOWNSTREAM; a stream on a non-manifest is ENOTMANIFEST', async () => {
    const f = await openFixture();
    const { manifest, streams } = await bashManifest(f);
    const unknown = await f.engine.run('read', { filePath: `artifact://${manifest}/results` });
    expect(unknown).toMatchObject({ status: 'failed', complete: false, output: { kind: 'page', bytes: 0 } });
    expect(unknown.error?.code).toBe('EUNKNOWNSTREAM');
    expect(unknown.model).toMatch(/^\[Status: failed\. EUNKNOWNSTREAM: /);
    const stdoutBlob = streams[0]?.digest as string;
    expect(await codeOf(f.engine.read(`artifact://${stdoutBlob}/stdout`))).toBe('ENOTMANIFEST');
    // The same blob read bare is fine: it is ordinary stored text.
    expect(await f.engine.read(`artifact://${stdoutBlob}`)).toMatchObject({ content: 'out\n' });
    expect(f.ops.filter((o) => o.kind === 'fs.read')).toEqual([]);
    await expectNoLeaks(f.storeDir);
  });

  it('a missing artifact is ENOTFOUND, for a bare URI, a manifest and a stream whose blob is gone', async () => {
    const f = await openFixture();
    const { manifest, streams } = await bashManifest(f);
    expect(await codeOf(f.engine.read(`artifact://${ABSENT}`))).toBe('ENOTFOUND');
    expect(await codeOf(f.engine.read(`artifact://${ABSENT}/stdout`))).toBe('ENOTFOUND');
    const stderrBlob = streams[1]?.digest as string;
    await fsp.rm(join(f.storeDir, 'blobs', 'sha256', stderrBlob.slice(0, 2), stderrBlob.slice(2)));
    const r = await f.engine.run('read', { filePath: `artifact://${manifest}/stderr` });
    expect(r).toMatchObject({ status: 'failed', error: { code: 'ENOTFOUND' } });
    // The other stream still reads.
    expect(await f.engine.read(`artifact://${manifest}/stdout`)).toMatchObject({ content: 'out\n' });
    expect(f.ops.filter((o) => o.kind === 'fs.read')).toEqual([]);
    await expectNoLeaks(f.storeDir);
  });

  it('a corrupt artifact is EINTEGRITY, also after an earlier good read', async () => {
    const f = await openFixture();
    const { manifest, streams } = await bashManifest(f, 'seq 1 1000');
    const uri = `artifact://${manifest}/stdout`;
    expect(await f.engine.read(uri, { limit: 1 })).toMatchObject({ content: '1\n', totalLines: 1000 });
    const blob = streams[0]?.digest as string;
    await flipBit(join(f.storeDir, 'blobs', 'sha256', blob.slice(0, 2), blob.slice(2)), 100, 3);
    const r = await f.engine.run('read', { filePath: uri, offset: 500, limit: 10 });
    expect(r).toMatchObject({ status: 'failed', error: { code: 'EINTEGRITY' } });
    expect(await codeOf(f.engine.read(`artifact://${blob}`))).toBe('EINTEGRITY');
    // A corrupt manifest blob is EINTEGRITY too.
    await flipBit(join(f.storeDir, 'blobs', 'sha256', manifest.slice(0, 2), manifest.slice(2)), 5);
    expect(await codeOf(f.engine.read(`artifact://${manifest}/stderr`))).toBe('EINTEGRITY');
    await expectNoLeaks(f.storeDir);
  });

  it('bad paging arguments are EBADARGS, named by field', async () => {
    const f = await openFixture();
    const { manifest } = await bashManifest(f);
    const uri = `artifact://${manifest}/stdout`;
    for (const args of [
      { filePath: uri, limit: 0 },
      { filePath: uri, limit: 2001 },
      { filePath: uri, offset: -1 },
      { filePath: uri, offset: 1.5 },
      { filePath: uri, stream: 'stdout' },
      { filePath: '' },
      {},
    ]) {
      const r = await f.engine.run('read', args);
      expect({ args, code: r.error?.code }).toEqual({ args, code: 'EBADARGS' });
    }
    expect(f.ops.filter((o) => o.kind !== 'process.spawn')).toEqual([]);
    await expectNoLeaks(f.storeDir);
  });
});
