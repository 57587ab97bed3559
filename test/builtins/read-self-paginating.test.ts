import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_PAGE_OUTPUT_BYTES } from '../../engine/call/page-capture.js';
import { blobCount, codeOf, expectNoLeaks, Hasher, openFixture, sha256 } from '../support/read-fixture.js';

/** A line of exactly `width` bytes (newline included) that names its index. */
const wideLine = (i: number, width: number) => `${String(i).padStart(8, '0')}${'x'.repeat(width - 9)}\n`;

describe('read is self-paginating: no retention, no truncation', () => {
  it('leaves the blob count unchanged over 100 reads, including 2 MB pages of artifacts and files', async () => {
    const { engine, storeDir, cwd } = await openFixture();
    // 4000 lines of 1000 bytes: a full 2000-line page is 2,000,000 bytes.
    const r = await engine.run('bash', {
      command: `awk 'BEGIN { for (i = 0; i < 4000; i++) { s = sprintf("%08d", i); while (length(s) < 999) s = s "x"; print s } }'`,
    });
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    expect(r.output.streams[0]).toMatchObject({ bytes: 4_000_000, lines: 4000, truncated: true });
    // The same content as a file in the working root.
    const fh = await fsp.open(join(cwd, 'wide.txt'), 'w');
    for (let i = 0; i < 4000; i += 500) {
      const part: string[] = [];
      for (let j = i; j < i + 500; j++) part.push(wideLine(j, 1000));
      await fh.write(part.join(''));
    }
    await fh.close();

    const before = await blobCount(storeDir);
    const digests = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const large = i % 10 === 0;
      const offset = large ? (i % 20 === 0 ? 0 : 2000) : (i * 37) % 4000;
      const limit = large ? 2000 : 1 + (i % 7);
      const fromFile = i % 4 === 1;
      const page = await engine.read(fromFile ? 'wide.txt' : uri, { offset, limit });
      expect(page.offset).toBe(offset);
      expect(page.lines).toBe(Math.min(limit, 4000 - offset));
      if (large && !fromFile) {
        expect(Buffer.byteLength(page.content)).toBe(2_000_000);
        digests.add(sha256(page.content));
      }
      if (fromFile)
        expect(page.content.startsWith(`${String(offset + 1).padStart(6)}\t${wideLine(offset, 1000)}`)).toBe(true);
      else expect(page.content.startsWith(wideLine(offset, 1000))).toBe(true);
    }
    expect(digests.size).toBe(2);
    expect(await blobCount(storeDir)).toBe(before);
    await expectNoLeaks(storeDir);
  });

  // How the bug shows if it returns: a session's log spills every large read page into a new
  // blob, so reads made by a model (always in a session) grow the store.
  it('reads recorded in a session write no blob either, and replay gives back the same page', async () => {
    const { engine, storeDir } = await openFixture();
    const r = await engine.run('bash', {
      command: `awk 'BEGIN { for (i = 0; i < 4000; i++) { s = sprintf("%08d", i); while (length(s) < 499) s = s "z"; print s } }'`,
    });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    const before = await blobCount(storeDir);
    const live = [];
    for (let i = 0; i < 5; i++) {
      live.push(await engine.run('read', { filePath: uri, offset: i * 100, limit: 2000 }, { session: 'reader' }));
    }
    expect(live.map((x) => x.status)).toEqual(['success', 'success', 'success', 'success', 'success']);
    expect(Buffer.byteLength(live[0]?.model ?? '')).toBeGreaterThan(1_000_000);
    expect(await blobCount(storeDir)).toBe(before);
    const replayed = await engine.replay('reader');
    expect(replayed.calls.map((c) => c.result.model)).toEqual(live.map((x) => x.model));
    expect(await blobCount(storeDir)).toBe(before);
    await expectNoLeaks(storeDir);
  });

  it('tiny toolOutput limits cannot truncate or fail a read page', async () => {
    // Small next to a read page, and still valid: the minimum depends on room for 16 streams and a status line.
    const maxModelBytes = 16 * 1024;
    const { engine, storeDir } = await openFixture({ toolOutput: { maxLines: 1, maxBytes: 1, maxModelBytes } });
    const r = await engine.run('bash', {
      command: `awk 'BEGIN { for (i = 0; i < 3000; i++) { s = sprintf("%08d", i); while (length(s) < 499) s = s "y"; print s } }'`,
    });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    // bash's own preview obeys the tiny limits ...
    expect(r.output.streams[0]).toMatchObject({ lines: 3000, truncated: true });
    expect(Buffer.byteLength(r.model)).toBeLessThanOrEqual(maxModelBytes);
    // ... a read page does not: 2000 lines of 500 bytes, ~1 MB, far over maxModelBytes.
    const uri = `artifact://${r.output.manifest}/stdout`;
    const call = await engine.run('read', { filePath: uri });
    expect(call.status).toBe('success');
    expect(call.output).toEqual({ kind: 'page', bytes: 1_000_000, lines: 2000 });
    expect(Buffer.byteLength(call.model)).toBeGreaterThan(maxModelBytes);
    const page = await engine.read(uri);
    const h = new Hasher();
    for (let i = 0; i < 2000; i++) h.update(`${String(i).padStart(8, '0')}${'y'.repeat(491)}\n`);
    expect(sha256(page.content)).toBe(h.digest());
    expect(call.model).toBe(`${page.content}[More: read(filePath="${uri}", offset=2000)]\n`);
    await expectNoLeaks(storeDir);
  });

  it('whole lines over 2 MiB fail with ERESOURCELIMIT, a line over 2 MiB reads in parts; files never cut', async () => {
    const { engine, storeDir, cwd } = await openFixture();
    // Two 1.5 MB lines: each fits alone, both together do not.
    const r = await engine.run('bash', {
      command: `for i in 1 2; do head -c 1500000 /dev/zero | tr '\\0' z; echo; done; echo tail`,
    });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    const big = await engine.run('read', { filePath: uri });
    expect(big).toMatchObject({ status: 'failed', error: { code: 'ERESOURCELIMIT', details: { fits: 1 } } });
    expect(Buffer.byteLength(big.model)).toBeLessThan(1024);
    expect(await engine.read(uri, { offset: 2 })).toMatchObject({ content: 'tail\n', totalLines: 3 });
    // One 3 MB line: the first 2 MiB, and the exact call that continues it.
    const long = await engine.run('bash', { command: `head -c 3000000 /dev/zero | tr '\\0' y; echo; echo end` });
    if (long.output?.kind !== 'streams') throw new Error('bash has named streams');
    const longUri = `artifact://${long.output.manifest}/stdout`;
    const part = await engine.run('read', { filePath: longUri });
    expect(part.status).toBe('success');
    expect(part.model.endsWith(`[More: read(filePath="${longUri}", offset=0, byteOffset=2097152)]\n`)).toBe(true);
    expect(await engine.read(longUri, { byteOffset: 2097152 })).toMatchObject({
      content: `${'y'.repeat(3000000 - 2097152)}\nend\n`,
      lines: 2,
      nextOffset: null,
      nextByteOffset: null,
    });

    const fh = await fsp.open(join(cwd, 'long-line.txt'), 'w');
    for (let i = 0; i < 48; i++) await fh.write('w'.repeat(64 * 1024));
    await fh.write('\nshort\n');
    await fh.close();
    expect(await codeOf(engine.read('long-line.txt'))).toBe('ERESOURCELIMIT');
    expect(await codeOf(engine.read('long-line.txt', { byteOffset: 10 }))).toBe('EBADARGS');
    expect(await engine.read('long-line.txt', { offset: 1 })).toMatchObject({
      content: '     2\tshort\n',
      totalLines: 2,
    });
    expect(MAX_PAGE_OUTPUT_BYTES).toBeGreaterThanOrEqual(2 * 1024 * 1024);
    await expectNoLeaks(storeDir);
  });
});
