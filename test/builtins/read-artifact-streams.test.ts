import { describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import {
  blobCount,
  expectNoLeaks,
  Hasher,
  hintsOf,
  moreOf,
  openFixture,
  seqDigest,
  sha256,
  tempDir,
} from '../support/read-fixture.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

describe('reading the streams of a bash call through read', () => {
  it('reads each stream of the manifest, and the bare manifest URI as its JSON', async () => {
    const { engine, storeDir, ops } = await openFixture();
    const r = await engine.run('bash', { command: 'printf "out 1\\nout 2\\n"; printf "err 1\\n" >&2' });
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const { manifest, streams } = r.output;

    const stdout = await engine.read(`artifact://${manifest}/stdout`);
    expect(stdout).toEqual({
      content: 'out 1\nout 2\n',
      offset: 0,
      lines: 2,
      totalLines: 2,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    const stderr = await engine.read(`artifact://${manifest}/stderr`);
    expect(stderr).toEqual({
      content: 'err 1\n',
      offset: 0,
      lines: 1,
      totalLines: 1,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });

    const bare = await engine.read(`artifact://${manifest}`);
    expect(sha256(bare.content)).toBe(manifest);
    expect(JSON.parse(bare.content).streams.map((s: { name: string; digest: string }) => [s.name, s.digest])).toEqual(
      streams.map((s) => [s.name, s.digest]),
    );

    // The tool call itself: the page exactly, metadata with the continuation, the op an artifact read.
    const call = await engine.run('read', { filePath: `artifact://${manifest}/stderr` });
    expect(call.model).toBe('err 1\n');
    expect(call.output).toEqual({ kind: 'page', bytes: 6, lines: 1 });
    expect(call.metadata).toMatchObject({
      uri: `artifact://${manifest}/stderr`,
      digest: manifest,
      stream: 'stderr',
      offset: 0,
      lines: 1,
      totalLines: 1,
      nextOffset: null,
    });
    const readOps = ops.filter((o) => o.kind !== 'process.spawn');
    expect(readOps.every((o) => o.kind === 'artifact.read')).toBe(true);
    expect(readOps.at(-1)).toMatchObject({ kind: 'artifact.read', digest: manifest, stream: 'stderr' });
    expect(readOps.find((o) => o.stream === null)).toMatchObject({ digest: manifest });
    expect(await blobCount(storeDir)).toBe(3);
    await expectNoLeaks(storeDir);
  });

  it('reads content beyond the preview from the hint offset, and pages to the end via nextOffset', async () => {
    const { engine, storeDir } = await openFixture();
    const n = 40_000; // ~230 KB of stdout: far beyond the 51200-byte preview
    const r = await engine.run('bash', { command: `seq 1 ${n}; echo done >&2` });
    expect(r.status).toBe('success');
    const hints = hintsOf(r.model);
    expect(hints).toHaveLength(1);
    const hint = hints[0] as { uri: string; offset: number };
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    expect(hint.uri).toBe(`artifact://${r.output.manifest}/stdout`);
    expect(hint.offset).toBeGreaterThan(0);
    expect(hint.offset).toBeLessThan(n);

    // Following the hint: the preview's whole lines, then the stream from the offset, page by page.
    const preview = r.model.slice('[stdout]\n'.length, r.model.indexOf('[Truncated:'));
    const whole = preview.slice(0, preview.lastIndexOf('\n') + 1);
    const h = new Hasher();
    h.update(whole);
    let offset: number | null = hint.offset;
    let pages = 0;
    while (offset !== null) {
      const page = await engine.read(hint.uri, { offset, limit: 2000 });
      expect(page.offset).toBe(offset);
      expect(page.totalLines).toBe(n);
      h.update(page.content);
      pages++;
      offset = page.nextOffset;
    }
    expect(pages).toBe(Math.ceil((n - hint.offset) / 2000));
    expect({ digest: h.digest(), bytes: h.bytes }).toEqual(seqDigest(n));

    // Past the end: an empty page, no continuation.
    expect(await engine.read(hint.uri, { offset: n })).toEqual({
      content: '',
      offset: n,
      lines: 0,
      totalLines: n,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    await expectNoLeaks(storeDir);
  });

  it('shows the model where the next page starts: [More: read(filePath="<same filePath>", offset=N)]', async () => {
    const { engine } = await openFixture();
    const r = await engine.run('bash', { command: 'seq 1 10' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    const first = await engine.run('read', { filePath: uri, offset: 2, limit: 3 });
    expect(first.model).toBe(`3\n4\n5\n[More: read(filePath="${uri}", offset=5)]\n`);
    expect(moreOf(first.model)).toEqual({ filePath: uri, offset: 5 });
    // The page alone is what Engine.read returns: the continuation line is for the model only.
    expect(await engine.read(uri, { offset: 2, limit: 3 })).toMatchObject({ content: '3\n4\n5\n', nextOffset: 5 });
    const last = await engine.run('read', { filePath: uri, offset: 8 });
    expect(last.model).toBe('9\n10\n');
    expect(moreOf(last.model)).toBeUndefined();
  });

  it('reads artifacts by possession: from another session and from another engine on the same store', async () => {
    const a = await openFixture();
    const r = await a.engine.run('bash', { command: 'echo secret-of-session-a' }, { session: 'session-a' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;

    const other = await a.engine.run('read', { filePath: uri }, { session: 'session-b' });
    expect(other).toMatchObject({ status: 'success', session: 'session-b', model: 'secret-of-session-a\n' });
    expect(await a.engine.read(uri, { session: 'session-c' })).toMatchObject({ content: 'secret-of-session-a\n' });

    // A second engine, another working directory, same store: the URI is all it needs.
    const elsewhere = await tempDir();
    const b = await Engine.open({ store: a.storeDir, cwd: elsewhere, minThreads: 1 });
    try {
      expect(await b.read(uri, { session: 'session-d' })).toMatchObject({ content: 'secret-of-session-a\n' });
      const single = r.output.streams[0]?.digest as string;
      expect(await b.read(`artifact://${single}`)).toMatchObject({ content: 'secret-of-session-a\n' });
    } finally {
      await b.close();
    }
    await expectNoLeaks(a.storeDir);
  });
});
