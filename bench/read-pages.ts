/**
 * Paged reads deep in a large artifact (issue 2): the last page of a 1 GiB
 * artifact must come back within 3x the time of its first page, thanks to the
 * sparse line index, and reading it must cost no more memory than the page
 * (RSS growth checked against the page's size). For comparison it also times
 * a naive read of the last page that scans from the start.
 *
 * The artifact is generated line by line and streamed through
 * `store.writer()`, so the benchmark itself never holds it in memory. Page
 * timings are medians over several runs, all after the first (verifying) read.
 *
 *   SLUICE_BENCH_READ_BYTES (default 1 GiB), SLUICE_BENCH_READ_RUNS (default 9)
 */
import { constants, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { MAX_PAGE_LINES } from '../store/pages.js';
import { Store } from '../store/store.js';
import { check, passes, target } from './targets.js';
import { envInt, generatedChunks, median, report, tempDir, withPeakRss } from './util.js';

const BYTES = envInt('SLUICE_BENCH_READ_BYTES', 1024 ** 3);
const RUNS = envInt('SLUICE_BENCH_READ_RUNS', 9);
const NAIVE_RUNS = Math.min(3, RUNS);
const CHUNK = 1024 * 1024;

/**
 * "Reading costs no more memory than the page": the page is held as bytes and
 * as a JavaScript string (UTF-16, up to twice its bytes), beside one read
 * buffer and the line index's block; a read that scanned or held the artifact
 * would grow by hundreds of MiB.
 */
const PAGE_MEMORY_FACTOR = 4;
const READ_BUFFER_ALLOWANCE = 1024 * 1024;

const FILL = 'abcdefghijklmnopqrstuvwxyz0123456789 é€😀 ABCDEFGHIJKLMNOPQRSTUVWXYZ '.repeat(4);

/** Line `i`: its number and 20 to ~140 bytes of mixed ASCII and multi-byte text. */
function line(i: number): string {
  const n = 20 + (((i * 2654435761) >>> 0) % 100);
  return `${i} ${FILL.slice(0, n)}\n`;
}

/** Streams generated lines into the store until at least `bytes` bytes; returns the blob. */
async function build(store: Store, bytes: number): Promise<{ digest: string; bytes: number; lines: number }> {
  const w = store.writer();
  // One chunk in flight at a time: memory stays at a chunk, whatever the size.
  for (const buf of generatedChunks(line, bytes, CHUNK)) await w.write(buf);
  return w.commit();
}

/** What a store without an index would do: scan from byte 0 counting lines, then collect the page. */
async function naiveLastPage(path: string, offset: number, limit: number): Promise<string> {
  const fh = await fsp.open(path, constants.O_RDONLY);
  try {
    const buf = Buffer.allocUnsafe(CHUNK);
    const decoder = new StringDecoder('utf8');
    const parts: string[] = [];
    let line = 0;
    let taken = 0;
    let position = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, CHUNK, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      let start = 0;
      while (line < offset && start < bytesRead) {
        const nl = buf.indexOf(0x0a, start);
        if (nl === -1 || nl >= bytesRead) start = bytesRead;
        else {
          line++;
          start = nl + 1;
        }
      }
      if (line < offset) continue;
      let end = start;
      while (taken < limit) {
        const nl = buf.indexOf(0x0a, end);
        if (nl === -1 || nl >= bytesRead) {
          end = bytesRead;
          break;
        }
        taken++;
        end = nl + 1;
      }
      parts.push(decoder.write(buf.subarray(start, end)));
      if (taken >= limit) break;
    }
    parts.push(decoder.end());
    return parts.join('');
  } finally {
    await fh.close();
  }
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

async function main(): Promise<void> {
  const tmp = tempDir('sluice-bench-read-');
  try {
    const dir = join(tmp.dir, 'store');
    const t0 = performance.now();
    const blob = await build(await Store.open(dir), BYTES);
    const publishMs = performance.now() - t0;

    // A fresh store instance: its first read hashes the whole blob (and checks the index).
    const reader = await Store.open(dir);
    const uri = `artifact://${blob.digest}`;
    const t1 = performance.now();
    global.gc?.();
    const verifying = await withPeakRss(() => reader.readPage(uri, { offset: 0 }));
    const first = verifying.value;
    const verifyMs = performance.now() - t1;
    const lastOffset = Math.max(0, first.totalLines - MAX_PAGE_LINES);
    // Memory of the first last-page read, before repeated reads have grown the heap to fit it.
    global.gc?.();
    const coldGrowth = (await withPeakRss(() => reader.readPage(uri, { offset: lastOffset }))).peakGrowth;

    const firstMs: number[] = [];
    const lastMs: number[] = [];
    let lastContent = '';
    for (let i = 0; i < RUNS + 1; i++) {
      const a = performance.now();
      await reader.readPage(uri, { offset: 0 });
      const b = performance.now();
      const last = await reader.readPage(uri, { offset: lastOffset });
      const c = performance.now();
      lastContent = last.content;
      if (last.nextOffset !== null || last.lines !== first.totalLines - lastOffset) {
        throw new Error(`last page has nextOffset ${last.nextOffset} and ${last.lines} lines`);
      }
      // The first round warms the page cache and the JIT; it is not measured.
      if (i === 0) continue;
      firstMs.push(b - a);
      lastMs.push(c - b);
    }

    // Memory: the worst of the first and several later last-page reads, against what the page itself is.
    let peakGrowth = coldGrowth;
    for (let i = 0; i < 5; i++) {
      global.gc?.();
      peakGrowth = Math.max(
        peakGrowth,
        (await withPeakRss(() => reader.readPage(uri, { offset: lastOffset }))).peakGrowth,
      );
    }
    const pageBytes = Buffer.byteLength(lastContent);
    const memoryBound = PAGE_MEMORY_FACTOR * pageBytes + READ_BUFFER_ALLOWANCE;

    const naiveMs: number[] = [];
    let naiveMatches = true;
    for (let i = 0; i < NAIVE_RUNS; i++) {
      const a = performance.now();
      const content = await naiveLastPage(reader.layout.blobPath(blob.digest), lastOffset, MAX_PAGE_LINES);
      naiveMs.push(performance.now() - a);
      naiveMatches &&= content === lastContent;
    }

    const firstPageMs = median(firstMs);
    const lastPageMs = median(lastMs);
    const ratio = Math.round((lastPageMs / firstPageMs) * 1000) / 1000;
    const indexBytes = (await fsp.stat(reader.layout.indexPath(blob.digest)).catch(() => undefined))?.size ?? 0;
    const targets = [
      target('read-pages.last-page', 'last page of a 1 GiB artifact ≤ 3× its first page', ratio, '<=', 3, 'x'),
      target(
        'read-pages.memory',
        `RSS growth reading the last page ≤ ${PAGE_MEMORY_FACTOR}× the page + ${READ_BUFFER_ALLOWANCE / 1024 / 1024} MiB`,
        peakGrowth,
        '<=',
        memoryBound,
        'bytes',
      ),
      check('read-pages.content', 'the last page equals a scan from the start', naiveMatches),
    ];
    report({
      bench: 'read-pages',
      bytes: blob.bytes,
      totalLines: first.totalLines,
      runs: RUNS,
      publishMs: Math.round(publishMs),
      verifyMs: Math.round(verifyMs),
      indexBytes,
      firstPageMs: round(firstPageMs),
      lastPageMs: round(lastPageMs),
      ratio,
      naiveLastPageMs: round(median(naiveMs)),
      naiveVsIndexed: Math.round((median(naiveMs) / lastPageMs) * 10) / 10,
      pageBytes,
      verifyRssGrowthBytes: verifying.peakGrowth,
      firstLastPageRssGrowthBytes: coldGrowth,
      lastPageRssGrowthBytes: peakGrowth,
      lastPageMemoryBoundBytes: memoryBound,
      naiveMatches,
      targets,
      pass: passes(targets),
    });
  } finally {
    tmp.remove();
  }
}

await main();
