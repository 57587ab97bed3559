import { execFileSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { blobCount, codeOf, expectNoLeaks, openFixture } from '../support/read-fixture.js';

/** A valid 1×1 PNG (signature, IHDR, IDAT, IEND). */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01]);
const GIF = Buffer.concat([Buffer.from('GIF89a'), Buffer.from([1, 0, 1, 0, 0, 0, 0, 0x3b])]);
const WEBP = Buffer.concat([Buffer.from('RIFF'), Buffer.from([26, 0, 0, 0]), Buffer.from('WEBPVP8L'), Buffer.alloc(8)]);
const PDF = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');

const numbered = (from: number, lines: string[]) =>
  lines.map((l, i) => `${String(from + i).padStart(6)}\t${l}\n`).join('');

describe('filesystem text reads', () => {
  it('numbers lines like cat -n and pages with the same zero-based offset and limit rules', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    await fsp.writeFile(join(cwd, 'poem.txt'), 'one\ntwo é\r\nthree 😀\nfour\nfive');
    expect(await engine.read('poem.txt')).toEqual({
      content: numbered(1, ['one', 'two é\r', 'three 😀', 'four', 'five']),
      offset: 0,
      lines: 5,
      totalLines: 5,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    expect(await engine.read('poem.txt', { offset: 1, limit: 2 })).toEqual({
      content: numbered(2, ['two é\r', 'three 😀']),
      offset: 1,
      lines: 2,
      totalLines: 5,
      nextOffset: 3,
      nextByteOffset: null,
      lossy: false,
    });
    // The continuation line repeats the filePath as given.
    const call = await engine.run('read', { filePath: './poem.txt', offset: 3, limit: 1 });
    expect(call.model).toBe(`${numbered(4, ['four'])}[More: read(filePath="./poem.txt", offset=4)]\n`);
    expect(call.metadata).toMatchObject({ kind: 'text', filePath: './poem.txt', path: join(cwd, 'poem.txt') });
    expect(await engine.read(join(cwd, 'poem.txt'), { offset: 4 })).toMatchObject({
      content: numbered(5, ['five']),
      nextOffset: null,
    });
    expect(await engine.read('poem.txt', { offset: 5 })).toMatchObject({ content: '', lines: 0, nextOffset: null });
    await fsp.writeFile(join(cwd, 'empty.txt'), '');
    expect(await engine.read('empty.txt')).toEqual({
      content: '',
      offset: 0,
      lines: 0,
      totalLines: 0,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    expect(await blobCount(storeDir)).toBe(0);
    await expectNoLeaks(storeDir);
  });

  it('pages deep into a large file and counts every line of it', async () => {
    const { engine, cwd } = await openFixture();
    const fh = await fsp.open(join(cwd, 'big.log'), 'w');
    const n = 300_000; // ~ 9 MB, written in parts
    for (let i = 0; i < n; i += 10_000) {
      const part: string[] = [];
      for (let j = i; j < i + 10_000; j++) part.push(`line ${j} ${'.'.repeat(20)}\n`);
      await fh.write(part.join(''));
    }
    await fh.close();
    const page = await engine.read('big.log', { offset: n - 3, limit: 10 });
    expect(page).toEqual({
      content: numbered(
        n - 2,
        [n - 3, n - 2, n - 1].map((j) => `line ${j} ${'.'.repeat(20)}`),
      ),
      offset: n - 3,
      lines: 3,
      totalLines: n,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    const first = await engine.read('big.log');
    expect(first).toMatchObject({ lines: 2000, totalLines: n, nextOffset: 2000 });
  });

  it('replaces invalid UTF-8 past the first 8 KiB with U+FFFD instead of failing', async () => {
    const { engine, cwd } = await openFixture();
    const head = `${'a'.repeat(99)}\n`.repeat(100); // 10,000 bytes of clean text
    await fsp.writeFile(join(cwd, 'late.txt'), Buffer.concat([Buffer.from(head), Buffer.from([0x62, 0xff, 0x0a])]));
    expect(await engine.read('late.txt', { offset: 100 })).toMatchObject({
      content: numbered(101, ['b\uFFFD']),
      totalLines: 101,
    });
  });
});

describe('filesystem directory reads', () => {
  it('lists entries sorted, directories with a trailing /, paged by offset and limit', async () => {
    const { engine, cwd } = await openFixture();
    await fsp.mkdir(join(cwd, 'dir'));
    for (const name of ['b.txt', 'a.txt', 'Z.md']) await fsp.writeFile(join(cwd, 'dir', name), 'x\n');
    await fsp.mkdir(join(cwd, 'dir', 'sub'));
    await fsp.mkdir(join(cwd, 'dir', '.hidden'));
    expect(await engine.read('dir')).toEqual({
      content: '.hidden/\nZ.md\na.txt\nb.txt\nsub/\n',
      offset: 0,
      lines: 5,
      totalLines: 5,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    const call = await engine.run('read', { filePath: 'dir/', offset: 1, limit: 2 });
    expect(call.model).toBe('Z.md\na.txt\n[More: read(filePath="dir/", offset=3)]\n');
    expect(call.metadata).toMatchObject({ kind: 'directory', offset: 1, lines: 2, totalLines: 5, nextOffset: 3 });
    expect(await engine.read('.')).toMatchObject({ content: 'dir/\n' });
  });
});

describe('filesystem media reads: detected by content, never by extension', () => {
  it('returns a real PNG as an attachment, also when it is named .txt; a text file named .png is text', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    await fsp.writeFile(join(cwd, 'pixel.png'), PNG);
    await fsp.writeFile(join(cwd, 'pixel.txt'), PNG);
    await fsp.writeFile(join(cwd, 'notes.png'), 'not an image\n');
    for (const name of ['pixel.png', 'pixel.txt']) {
      const r = await engine.run('read', { filePath: name });
      expect(r.status).toBe('success');
      expect(r.attachments).toEqual([{ mediaType: 'image/png', data: PNG.toString('base64'), name }]);
      expect(r.model).toBe(`[image/png attached: ${name}, ${PNG.length} bytes]\n`);
      expect(r.metadata).toMatchObject({ kind: 'image', mediaType: 'image/png', bytes: PNG.length });
      const page = await engine.read(name);
      expect(page.attachments?.[0]?.data).toBe(PNG.toString('base64'));
      expect(page).toMatchObject({ lines: 1, totalLines: 1, nextOffset: null });
    }
    expect(await engine.read('notes.png')).toMatchObject({ content: numbered(1, ['not an image']) });
    expect(await engine.read('notes.png')).not.toHaveProperty('attachments');
    expect(await blobCount(storeDir)).toBe(0);
  });

  it('detects JPEG, GIF, WebP and PDF by their magic bytes', async () => {
    const { engine, cwd } = await openFixture();
    const cases: Array<[string, Buffer, string]> = [
      ['photo.dat', JPEG, 'image/jpeg'],
      ['anim', GIF, 'image/gif'],
      ['pic.bin', WEBP, 'image/webp'],
      ['paper.txt', PDF, 'application/pdf'],
    ];
    for (const [name, bytes, mediaType] of cases) {
      await fsp.writeFile(join(cwd, name), bytes);
      const r = await engine.run('read', { filePath: name });
      expect({ name, status: r.status, attachments: r.attachments }).toEqual({
        name,
        status: 'success',
        attachments: [{ mediaType, data: bytes.toString('base64'), name }],
      });
    }
  });

  it('bounds attachments: an image over 20 MiB is ERESOURCELIMIT', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    const path = join(cwd, 'huge.png');
    await fsp.writeFile(path, PNG);
    await fsp.truncate(path, 20 * 1024 * 1024 + 1); // sparse: no 20 MiB written
    expect(await codeOf(engine.read('huge.png'))).toBe('ERESOURCELIMIT');
    await expectNoLeaks(storeDir);
  });
});

describe('filesystem binary and special files', () => {
  it('refuses binary files (NUL bytes or invalid UTF-8 in the first 8 KiB) with EBINARY', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    await fsp.writeFile(join(cwd, 'nul.txt'), Buffer.from('text\0more\n'));
    await fsp.writeFile(join(cwd, 'latin1.txt'), Buffer.from('caf\xe9\n', 'latin1'));
    await fsp.copyFile(process.execPath, join(cwd, 'node-binary'));
    for (const name of ['nul.txt', 'latin1.txt', 'node-binary']) {
      const r = await engine.run('read', { filePath: name });
      expect({ name, code: r.error?.code }).toEqual({ name, code: 'EBINARY' });
    }
    // A multi-byte character cut by the 8 KiB sniff window is not binary.
    await fsp.writeFile(join(cwd, 'cut.txt'), `${'a'.repeat(8191)}é\n`);
    expect(await engine.read('cut.txt')).toMatchObject({ lines: 1, totalLines: 1 });
    await expectNoLeaks(storeDir);
  });

  it('refuses a FIFO without blocking on it', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    execFileSync('mkfifo', [join(cwd, 'pipe')]);
    expect(await codeOf(engine.read('pipe'))).toBe('EBADARGS');
    await expectNoLeaks(storeDir);
  });
});
