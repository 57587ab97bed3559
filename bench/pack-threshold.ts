/**
 * Where packing stops paying (issue 21, "no file per small output"): for
 * each blob size, publishes SLUICE_BENCH_BLOBS distinct blobs, 16 in flight,
 * once as files of their own (`packMaxBlobBytes: 0`) and once into a pack,
 * and reports publishes per second and CPU µs per publish of both, with the
 * ratio. The default threshold (store/directory/packs.ts) is the largest size at
 * which the packed side is still at least as fast; the target is that ratio
 * (packed / files) >= 1 at every size up to it (docs/benchmarks.md, "Packs").
 *
 *   SLUICE_BENCH_BLOBS (default 2000)
 */
import { Store } from '../store/store.js';
import { passes, target } from './targets.js';
import { envInt, report, tempDir } from './util.js';

const BLOBS = envInt('SLUICE_BENCH_BLOBS', 2000);
const IN_FLIGHT = 16;
const SIZES = [128, 4096, 16 * 1024, 64 * 1024, 256 * 1024];
const DEFAULT_THRESHOLD = 64 * 1024;

async function run(dir: string, size: number, packMaxBlobBytes: number): Promise<{ perSec: number; cpuUs: number }> {
  const store = await Store.open(dir, { packMaxBlobBytes });
  const body = Buffer.alloc(size, 0x61);
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  try {
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < BLOBS) {
          const i = next++;
          const b = Buffer.from(body);
          b.write(`${size}:${packMaxBlobBytes}:${i}:`, 0);
          await store.publishBytes(b);
        }
      }),
    );
  } finally {
    await store.close();
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { perSec: Math.round(BLOBS / (ms / 1000)), cpuUs: Math.round((cpu.user + cpu.system) / BLOBS) };
}

const tmp = tempDir('sluice-bench-packs-');
try {
  const rows = [];
  for (const size of SIZES) {
    const files = await run(`${tmp.dir}/files-${size}`, size, 0);
    const packed = await run(`${tmp.dir}/packed-${size}`, size, 1024 * 1024 - 1);
    rows.push({ size, files, packed, ratio: Math.round((packed.perSec / files.perSec) * 100) / 100 });
  }
  const targets = rows
    .filter((r) => r.size <= DEFAULT_THRESHOLD)
    .map((r) =>
      target(
        `pack-threshold.${r.size}`,
        `${r.size < 1024 ? `${r.size} B` : `${r.size / 1024} KiB`} blobs: packed publishes/s ≥ 1.0× files of their own`,
        r.ratio,
        '>=',
        1,
        'x',
      ),
    );
  report({
    bench: 'pack-threshold',
    blobs: BLOBS,
    inFlight: IN_FLIGHT,
    defaultThreshold: DEFAULT_THRESHOLD,
    sizes: rows,
    targets,
    pass: passes(targets),
  });
} finally {
  tmp.remove();
}
