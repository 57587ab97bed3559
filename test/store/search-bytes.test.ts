/**
 * The byte search of blobs larger than a read (SEARCH_READ_BYTES) and large enough to
 * have a line index: hits that straddle a read boundary, at the first and the
 * last byte, on CRLF lines, a multi-byte pattern split across a boundary, no
 * hits at all, case-insensitive literals, every page followed to the end; and
 * an index whose line numbers are wrong, which a search to the end notices
 * (its count of lines disagrees with the blob's) and searches again without.
 * Each is checked against `grep -n` of the blob file, numbers zero-based.
 */
import { spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SEARCH_READ_BYTES, searchArtifact } from '../../store/search.js';
import { Store } from '../../store/store.js';
import { tempDir, tmpEntries } from './helpers.js';

const MIB = 1024 * 1024;
/** One read of the search: the boundaries below are between reads of a pass from byte 0. */
const READ = SEARCH_READ_BYTES;
const NEEDLE = 'NEEDLE[7]';
const WIDE = 'é€ü';

// Blobs in files of their own, so the test can reach the index beside one.
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

/** `grep -n` line numbers of `args` in `file`, zero-based (`-c`-style: only the numbers). */
function grepLines(file: string, args: string[]): number[] {
  const r = spawnSync('grep', ['-n', ...args, '--', file], { encoding: 'utf8', maxBuffer: 64 * MIB });
  if (r.status !== 0 && r.status !== 1) throw new Error(`grep failed: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => Number(l.slice(0, l.indexOf(':'))) - 1);
}

/**
 * About 3.5 reads of lines written a chunk at a time (never held whole) to the
 * store and to a file: filler, with `NEEDLE` straddling the first three
 * read boundaries and at the first byte, `WIDE` split at 1.5 reads + 2 bytes
 * inside its second character, CRLF line ends on every 7th line, and, with
 * `endHit`, the needle as the last bytes (no final newline).
 */
async function build(dir: string, endHit: boolean) {
  const store = await Store.open(join(dir, 'store'));
  const file = join(dir, 'copy');
  const out = await fsp.open(file, 'w');
  const w = store.writer();
  const size = 3.5 * READ;
  const straddle: Array<[number, string, number]> = [
    [READ, NEEDLE, 4],
    [1.5 * READ, WIDE, 3],
    [2 * READ, NEEDLE, 1],
    [3 * READ, NEEDLE, NEEDLE.length - 1],
  ];
  let pos = 0;
  let parts: string[] = [];
  let held = 0;
  const emit = async (s: string) => {
    parts.push(s);
    pos += Buffer.byteLength(s);
    held += s.length;
    if (held > 256 * 1024) await flush();
  };
  const flush = async () => {
    const buf = Buffer.from(parts.join(''));
    parts = [];
    held = 0;
    await w.write(buf);
    await out.write(buf);
  };
  await emit(`${NEEDLE} at the first byte\n`);
  for (let i = 0; pos < size; i++) {
    const next = straddle[0];
    if (next && pos + 200 > next[0]) {
      // Filler up to the boundary minus the bytes of the pattern before it, then the pattern.
      const [at, text, before] = next;
      const pad = at - before - pos;
      await emit(`${'x'.repeat(pad)}${text} straddles ${at}\n`);
      straddle.shift();
      continue;
    }
    const body = `${i} filler lorem ipsum ${'abcdefghij'.slice(0, i % 10)}`;
    await emit(i % 7 === 0 ? `${body}\r\n` : `${body}\n`);
  }
  await emit(endHit ? `last line ends with ${NEEDLE}` : 'last line\n');
  await flush();
  await out.close();
  const blob = await w.commit();
  return { store, file, blob, uri: `artifact://${blob.digest}` };
}

/** Every page of a search, followed by nextOffset: the matching line numbers and texts. */
async function searchAll(store: Store, uri: string, pattern: string, opts: { ignoreCase?: boolean; limit?: number }) {
  const lines: number[] = [];
  const texts: string[] = [];
  let offset: number | null = 0;
  while (offset !== null) {
    const page = await searchArtifact(store, uri, { pattern, limit: opts.limit ?? 1000, offset, ...opts });
    for (const l of page.lines) {
      lines.push(l.line);
      texts.push(l.text);
    }
    offset = page.nextOffset;
  }
  return { lines, texts };
}

describe('the byte search of a blob larger than a read', () => {
  it('finds what grep -n finds across read boundaries, at both ends, on CRLF lines, page after page', async () => {
    const dir = await tempDir('sluice-search-bytes-');
    for (const endHit of [true, false]) {
      const sub = join(dir, String(endHit));
      await fsp.mkdir(sub);
      const { store, file, blob, uri } = await build(sub, endHit);
      expect(blob.bytes).toBeGreaterThan(3 * READ);
      await fsp.access(store.layout.indexPath(blob.digest));
      const expected = grepLines(file, ['-F', NEEDLE]);
      expect(expected.length).toBe(endHit ? 5 : 4);
      expect(expected[0]).toBe(0);
      for (const limit of [1000, 1, 2]) {
        expect((await searchAll(store, uri, NEEDLE, { limit })).lines).toEqual(expected);
      }
      // A multi-byte pattern split inside a character by a read boundary.
      const wide = await searchAll(store, uri, WIDE, {});
      expect(wide.lines).toEqual(grepLines(file, ['-F', WIDE]));
      expect(wide.lines).toHaveLength(1);
      // CRLF lines: the `\r` is content, shown and searchable.
      const crlf = await searchAll(store, uri, 'ipsum abcdef\r', {});
      expect(crlf.lines).toEqual(grepLines(file, ['-F', 'ipsum abcdef\r']));
      expect(crlf.lines.length).toBeGreaterThan(100);
      expect(crlf.texts.every((t) => t.endsWith('abcdef\r'))).toBe(true);
      // Ignoring ASCII case, in the bytes.
      expect((await searchAll(store, uri, 'needle[7]', { ignoreCase: true })).lines).toEqual(expected);
      expect((await searchAll(store, uri, 'IPSUM ABCDEFG', { ignoreCase: true })).lines).toEqual(
        grepLines(file, ['-i', '-F', 'IPSUM ABCDEFG']),
      );
      // Nothing to find: one page, no matches, the end reached.
      const none = await searchArtifact(store, uri, { pattern: 'NEEDLE[8]', limit: 1000 });
      expect(none).toMatchObject({ matches: 0, lines: [], nextOffset: null, totalLines: blob.lines });
      expect(await tmpEntries(store)).toEqual([]);
    }
    await fsp.rm(dir, { recursive: true, force: true });
  });

  it('gives the same lines when the index has wrong line numbers, searching to the end', async () => {
    const dir = await tempDir('sluice-search-bytes-');
    const { store, file, blob, uri } = await build(dir, true);
    const expected = grepLines(file, ['-F', NEEDLE]);
    // Verified (hashed, its index compared) by a first search, then the index is damaged under it.
    const reader = await Store.open(join(dir, 'store'));
    expect((await searchAll(reader, uri, NEEDLE, {})).lines).toEqual(expected);
    const idx = store.layout.indexPath(blob.digest);
    const bytes = await fsp.readFile(idx);
    // Every entry's line one too many: each still falls after a `\n`, in order.
    for (let at = 32; at < bytes.length; at += 16) bytes.writeBigUInt64LE(bytes.readBigUInt64LE(at) + 1n, at);
    await fsp.writeFile(idx, bytes);
    expect((await searchAll(reader, uri, NEEDLE, {})).lines).toEqual(expected);
    await fsp.rm(dir, { recursive: true, force: true });
  });
});
