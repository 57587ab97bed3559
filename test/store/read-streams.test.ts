import { describe, expect, it } from 'vitest';
import { encodeManifest, type ManifestStream } from '../../store/manifest.js';
import type { Store } from '../../store/store.js';
import { STORE_BACKENDS } from './backends.js';
import { sha256 } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

async function stream(store: Store, name: string, content: string): Promise<ManifestStream> {
  const info = await store.publishBytes(content);
  return { name, digest: info.digest, bytes: info.bytes, lines: info.lines };
}

async function manifestOf(store: Store, streams: ManifestStream[]): Promise<{ digest: string; json: string }> {
  const json = encodeManifest(streams);
  const { digest } = await store.publishBytes(json);
  return { digest, json };
}

describe.each(STORE_BACKENDS)('stream reads through a manifest ($name)', ({ openStore, corruptBlob, storedBytes }) => {
  it('reads each named stream, and the bare manifest URI as the manifest JSON itself', async () => {
    const store = await openStore();
    const out = await stream(store, 'stdout', 'out 1\nout 2\nout 3\n');
    const err = await stream(store, 'stderr', 'warn\r\n');
    const { digest, json } = await manifestOf(store, [out, err]);
    expect(await store.readPage(`artifact://${digest}`)).toMatchObject({
      content: json,
      lines: 1,
      totalLines: 1,
      digest,
      blob: digest,
    });
    expect(await store.readPage(`artifact://${digest}`)).not.toHaveProperty('stream');
    expect(await store.readPage(`artifact://${digest}/stdout`, { offset: 1, limit: 1 })).toEqual({
      content: 'out 2\n',
      offset: 1,
      lines: 1,
      totalLines: 3,
      nextOffset: 2,
      nextByteOffset: null,
      lossy: false,
      digest,
      stream: 'stdout',
      blob: out.digest,
    });
    expect(await store.readPage(`artifact://${digest}/stderr`)).toMatchObject({
      content: 'warn\r\n',
      totalLines: 1,
      nextOffset: null,
      blob: err.digest,
    });
  });

  it('reads custom stream names and a declared empty stream', async () => {
    const store = await openStore();
    const results = await stream(store, 'results', '{"ok":true}\n');
    const diagnostics = await stream(store, 'diagnostics', '');
    const { digest } = await manifestOf(store, [results, diagnostics]);
    expect(await store.readPage(`artifact://${digest}/results`)).toMatchObject({ content: '{"ok":true}\n' });
    expect(await store.readPage(`artifact://${digest}/diagnostics`)).toMatchObject({
      content: '',
      lines: 0,
      totalLines: 0,
      nextOffset: null,
      blob: sha256(''),
    });
  });

  it('loads a manifest by digest, in declaration order', async () => {
    const store = await openStore();
    const b = await stream(store, 'b', 'B\n');
    const a = await stream(store, 'a', 'A\n');
    const { digest } = await manifestOf(store, [b, a]);
    const manifest = await store.loadManifest(digest);
    expect(manifest.streams.map((s) => s.name)).toEqual(['b', 'a']);
    expect(manifest.streams[0]).toEqual(b);
  });

  it('rejects a stream the manifest does not declare with EUNKNOWNSTREAM naming the declared ones', async () => {
    const store = await openStore();
    const { digest } = await manifestOf(store, [await stream(store, 'stdout', 'x\n')]);
    await expect(store.readPage(`artifact://${digest}/stdin`)).rejects.toMatchObject({
      code: 'EUNKNOWNSTREAM',
      details: { digest, stream: 'stdin', streams: ['stdout'] },
    });
    const empty = await manifestOf(store, []);
    await expect(store.readPage(`artifact://${empty.digest}/stdout`)).rejects.toMatchObject({ code: 'EUNKNOWNSTREAM' });
  });

  it.each([
    ['plain text', 'just some text\n'],
    ['empty content', ''],
    ['JSON that is not a manifest', '{"streams":[]}\n'],
    ['a manifest of another kind', '{"kind":"other/1","streams":[]}\n'],
    [
      'a manifest with an invalid stream name',
      `{"kind":"sluice.manifest/1","streams":[{"name":"..","digest":"${sha256('')}","bytes":0,"lines":0}]}`,
    ],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
    // Regression: read accepted any valid encoding while GC (which reads the first bytes only) did not
    // follow it, so streams a read could resolve were collected. Only the canonical bytes are a manifest.
    [
      'a valid manifest in non-canonical JSON (key order)',
      `{"streams":[{"name":"stdout","digest":"${sha256('')}","bytes":0,"lines":0}],"kind":"sluice.manifest/1"}\n`,
    ],
    [
      'a valid manifest in non-canonical JSON (whitespace)',
      `{ "kind": "sluice.manifest/1", "streams": [{"name":"stdout","digest":"${sha256('')}","bytes":0,"lines":0}] }\n`,
    ],
    ['a blob larger than any manifest', `{"kind":"sluice.manifest/1","streams":[]}${' '.repeat(17 * 1024)}`],
  ])('rejects a stream suffix on %s with ENOTMANIFEST', async (_label, content) => {
    const store = await openStore();
    const { digest } = await store.publishBytes(content);
    await expect(store.readPage(`artifact://${digest}/stdout`)).rejects.toMatchObject({
      code: 'ENOTMANIFEST',
      details: { digest },
    });
    await expect(store.loadManifest(digest)).rejects.toMatchObject({ code: 'ENOTMANIFEST' });
  });

  it('fails with ENOTFOUND when the manifest or the stream blob it names is absent', async () => {
    const store = await openStore();
    const ghost: ManifestStream = { name: 'stdout', digest: sha256('never stored'), bytes: 13, lines: 1 };
    const { digest } = await manifestOf(store, [ghost]);
    await expect(store.readPage(`artifact://${digest}/stdout`)).rejects.toMatchObject({
      code: 'ENOTFOUND',
      details: { digest: ghost.digest },
    });
    const absent = sha256('no manifest');
    await expect(store.readPage(`artifact://${absent}/stdout`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('fails with EINTEGRITY when the manifest or the stream blob is corrupt', async () => {
    const store = await openStore();
    const out = await stream(store, 'stdout', 'payload\n');
    const { digest } = await manifestOf(store, [out]);
    await corruptBlob(store, out.digest, 2);
    await expect(store.readPage(`artifact://${digest}/stdout`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    await corruptBlob(store, digest, 10);
    await expect(store.readPage(`artifact://${digest}/stdout`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
  });

  it('fails with EINTEGRITY when the manifest records a size its stream blob does not have', async () => {
    const store = await openStore();
    const out = await stream(store, 'stdout', 'payload\n');
    const { digest } = await manifestOf(store, [{ ...out, bytes: out.bytes + 1 }]);
    await expect(store.readPage(`artifact://${digest}/stdout`)).rejects.toMatchObject({
      code: 'EINTEGRITY',
      details: { digest: out.digest, bytes: 8, expected: 9 },
    });
    // The manifest itself is intact and still reads as stored.
    expect((await store.readPage(`artifact://${digest}`)).content).toBe(
      (await storedBytes(store, digest)).toString('utf8'),
    );
  });
});
