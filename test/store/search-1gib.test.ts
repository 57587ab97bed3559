/**
 * Search on a 1 GiB artifact generated on the fly (streamed into the store,
 * never held): the matches of every page, followed by nextOffset to the end,
 * are exactly `grep -n` of the same bytes (the blob file itself), numbers
 * zero-based; the whole pass grows the process by far less than the
 * artifact (one read, one line window and the page).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { generatedChunks } from '../../bench/util.js';
import { searchArtifact } from '../../store/search.js';
import { Store } from '../../store/store.js';
import { tempDir, tmpEntries } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const GIB = 1024 ** 3;
const CHUNK = 1024 * 1024;

/** Line `i`: mostly filler, a needle on every 9973rd line and on a few chosen ones. */
function line(i: number): string {
  const needle = i % 9973 === 17 || i === 0 ? ' NEEDLE here' : '';
  return `${i} ${'lorem ipsum dolor sit amet é€ '.slice(0, 20 + (i % 37))}${needle}\n`;
}

/** The zero-based line numbers of `grep -n -F pattern file`, streamed (never held as one string). */
async function grepLines(file: string, pattern: string): Promise<number[]> {
  const child = spawn('grep', ['-n', '-F', '--', pattern, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const out: number[] = [];
  for await (const l of createInterface({ input: child.stdout })) out.push(Number(l.slice(0, l.indexOf(':'))) - 1);
  await new Promise((r) => child.on('close', r));
  return out;
}

describe('search on a 1 GiB artifact', () => {
  it('gives grep -n lines (zero-based) page after page, in bounded memory', { timeout: 600_000 }, async () => {
    const dir = await tempDir('sluice-search-1g-');
    const store = await Store.open(join(dir, 'store'));
    const w = store.writer();
    // Generated a chunk at a time, never whole (the same generator as bench/search.ts).
    for (const buf of generatedChunks(line, GIB, CHUNK)) await w.write(buf);
    const blob = await w.commit();
    expect(blob.bytes).toBeGreaterThanOrEqual(GIB);
    const expected = await grepLines(store.layout.blobPath(blob.digest), 'NEEDLE');
    expect(expected.length).toBeGreaterThan(1000);

    const reader = await Store.open(join(dir, 'store'));
    const uri = `artifact://${blob.digest}`;
    // Verify (hash) the blob first, as any first read does, so the sampled pass is the search alone.
    await reader.readPage(uri, { limit: 1 });
    global.gc?.();
    const start = process.memoryUsage.rss();
    let peak = start;
    const sample = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss());
    }, 5);
    const found: number[] = [];
    let offset: number | null = 0;
    let pages = 0;
    try {
      while (offset !== null) {
        const page = await searchArtifact(reader, uri, { pattern: 'NEEDLE', limit: 1000, offset });
        for (const l of page.lines) found.push(l.line);
        expect(page.totalLines).toBe(blob.lines);
        offset = page.nextOffset;
        pages++;
      }
    } finally {
      clearInterval(sample);
    }
    peak = Math.max(peak, process.memoryUsage.rss());
    expect(found).toEqual(expected);
    expect(pages).toBe(Math.ceil(expected.length / 1000) + (expected.length % 1000 === 0 ? 1 : 0));
    // Three read buffers of 3 MiB (a read and the line window), a page of 1000 short lines and the JIT's churn; the artifact is 1 GiB.
    expect(peak - start).toBeLessThan(64 * 1024 * 1024);
    expect(await tmpEntries(store)).toEqual([]);
  });
});
