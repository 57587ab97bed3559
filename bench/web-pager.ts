/**
 * The web view's pager jumps (issue 24): a page deep in a 1 GiB artifact,
 * read the way the page reads it (`GET /v1/read?offset=N&limit=200` with the
 * bearer token from a real `sluice serve` server on loopback), must come back
 * within 3x the time of the first page, and no page's response may be larger
 * than the page (the browser never receives more than it shows). Baselines:
 * the first page, in the same run.
 *
 * The artifact is the lines `0` to `N-1` (as `seq` prints them), streamed
 * into the store a chunk at a time, so the benchmark never holds it.
 *
 *   SLUICE_BENCH_WEB_BYTES (default 1 GiB), SLUICE_BENCH_WEB_RUNS (default 9)
 */
import { join } from 'node:path';
import { Engine } from '../engine/engine.js';
import { loadOrCreateToken } from '../server/auth.js';
import { startServer } from '../server/server.js';
import { Store } from '../store/store.js';
import { passes, target } from './targets.js';
import { envInt, median, report, tempDir } from './util.js';

const BYTES = envInt('SLUICE_BENCH_WEB_BYTES', 1024 ** 3);
const RUNS = envInt('SLUICE_BENCH_WEB_RUNS', 9);
/** The pager's page: 200 lines (web/pager-view.ts). */
const PAGE = 200;
const CHUNK = 1024 * 1024;

/** Writes the lines `0`, `1`, … until at least `bytes` bytes; returns the blob and its line count. */
async function build(store: Store, bytes: number): Promise<{ digest: string; lines: number }> {
  const w = store.writer();
  let written = 0;
  let n = 0;
  while (written < bytes) {
    let text = '';
    while (text.length < CHUNK && written + text.length < bytes) text += `${n++}\n`;
    written += text.length;
    await w.write(Buffer.from(text, 'latin1'));
  }
  const blob = await w.commit();
  return { digest: blob.digest, lines: n };
}

async function main(): Promise<void> {
  const tmp = tempDir('sluice-bench-web-');
  try {
    const storeDir = join(tmp.dir, 'store');
    const blob = await build(await Store.open(storeDir), BYTES);
    const engine = await Engine.open({ store: storeDir, cwd: tmp.dir });
    const { token } = await loadOrCreateToken(engine.store.root);
    const server = await startServer(engine, { token, port: 0 });
    try {
      const uri = `artifact://${blob.digest}`;
      const read = async (offset: number) => {
        const q = new URLSearchParams({ filePath: uri, offset: String(offset), limit: String(PAGE) });
        const res = await fetch(`${server.url}/v1/read?${q}`, { headers: { authorization: `Bearer ${token}` } });
        const body = await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`read at ${offset}: ${res.status} ${Buffer.from(body).toString()}`);
        const page = JSON.parse(Buffer.from(body).toString('utf8')) as {
          offset: number;
          lines: number;
          content: string;
        };
        if (page.offset !== offset || page.lines !== Math.min(PAGE, blob.lines - offset)) {
          throw new Error(`read at ${offset} gave ${page.lines} lines at ${page.offset}`);
        }
        if (!page.content.startsWith(`${offset}\n`))
          throw new Error(`read at ${offset} starts ${page.content.slice(0, 20)}`);
        return body.byteLength;
      };
      // The first read verifies the blob (hashes all of it): not measured.
      await read(0);
      const deep = Math.floor(blob.lines * 0.9);
      const last = blob.lines - PAGE;
      const firstMs: number[] = [];
      const deepMs: number[] = [];
      const lastMs: number[] = [];
      let largest = 0;
      for (let i = 0; i < RUNS + 1; i++) {
        const a = performance.now();
        largest = Math.max(largest, await read(0));
        const b = performance.now();
        largest = Math.max(largest, await read(deep));
        const c = performance.now();
        largest = Math.max(largest, await read(last));
        const d = performance.now();
        if (i === 0) continue;
        firstMs.push(b - a);
        deepMs.push(c - b);
        lastMs.push(d - c);
      }
      const first = median(firstMs);
      const ratioDeep = Math.round((median(deepMs) / first) * 1000) / 1000;
      const ratioLast = Math.round((median(lastMs) / first) * 1000) / 1000;
      // A page of 200 lines of at most 10 digits, as JSON with its fields.
      const pageBound = PAGE * 11 + 512;
      const targets = [
        target(
          'web-pager.deep',
          'GET /v1/read of a page at 90% of a 1 GiB artifact ≤ 3× the first page',
          ratioDeep,
          '<=',
          3,
          'x',
        ),
        target('web-pager.last', 'GET /v1/read of the last page ≤ 3× the first page', ratioLast, '<=', 3, 'x'),
        target(
          'web-pager.response',
          'every response ≤ one page (200 lines of ≤ 10 digits, as JSON)',
          largest,
          '<=',
          pageBound,
          'bytes',
        ),
      ];
      report({
        bench: 'web-pager',
        bytes: BYTES,
        totalLines: blob.lines,
        runs: RUNS,
        deepLine: deep,
        firstPageMs: Math.round(first * 1000) / 1000,
        deepPageMs: Math.round(median(deepMs) * 1000) / 1000,
        lastPageMs: Math.round(median(lastMs) * 1000) / 1000,
        ratioDeep,
        ratioLast,
        largestResponseBytes: largest,
        pageBoundBytes: pageBound,
        targets,
        pass: passes(targets),
      });
    } finally {
      await server.close();
      await engine.close();
    }
  } finally {
    tmp.remove();
  }
}

await main();
