/**
 * Capture throughput (and its memory, for one stream):
 * one bash call emitting N bytes on stdout, end to end through the engine
 * (worker, credits, capture file, SHA-256, line index, publication), against a
 * hand-written baseline on the main thread (spawn the same command, pipe it
 * through a SHA-256 hash into a file, fsync), and both against the machine's
 * SHA-256 ceiling (hashing the same number of bytes in memory), and against
 * the disk limit: `<same producer> | dd of=<file in the store's directory>
 * bs=1M conv=fsync`: sluice >= 0.9x the disk limit (issue 41) and >= 1.0x the
 * hand-written baseline. Per run it also reports each side's time, the CPU
 * the engine process used in its runs (main, worker and libuv threads; the
 * tool runs under the spawn helper, outside it) and the host's others share
 * in each phase: what a busy host takes from each side
 * (docs/benchmarks.md, "A busy host").
 *
 *   SLUICE_BENCH_BYTES (default 1 GiB), SLUICE_BENCH_RUNS (default 3)
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Engine } from '../engine/engine.js';
import { type HostSample, hostSample, hostShare } from './host.js';
import { check, passes, target } from './targets.js';
import { envInt, median, mibps, report, tempDir, withPeakRss } from './util.js';

const BYTES = envInt('SLUICE_BENCH_BYTES', 1024 ** 3);
const RUNS = envInt('SLUICE_BENCH_RUNS', 3);
/**
 * The producer of run `run`: the same bytes per second and size every run, but a first line of its
 * own, so every run publishes a blob the store does not have yet. A run whose content is already
 * stored skips the final fsync and the wait for its own background flush (store/blob-writer.ts),
 * which the dd side, `conv=fsync` every time, never could.
 */
const command = (run: number) => `{ echo run ${run}; yes abcdefghijklmnopqrstuvwxyz0123456789; } | head -c ${BYTES}`;

async function baseline(dir: string, run: number): Promise<{ ms: number; digest: string }> {
  const t0 = performance.now();
  const child = spawn('bash', ['-c', command(run)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const hash = createHash('sha256');
  const path = join(dir, `baseline-${Date.now()}`);
  const out = createWriteStream(path);
  await pipeline(
    child.stdout,
    new Transform({
      transform(chunk: Buffer, _e, cb) {
        hash.update(chunk);
        cb(null, chunk);
      },
    }),
    out,
  );
  const fh = await fsp.open(path, 'r+');
  await fh.sync();
  await fh.close();
  const ms = performance.now() - t0;
  await fsp.unlink(path);
  return { ms, digest: hash.digest('hex') };
}

/** The disk limit: the producer piped into dd, which writes the file and fsyncs it. */
async function diskLimit(dir: string, run: number): Promise<number> {
  const path = join(dir, `dd-${Date.now()}`);
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const c = spawn('bash', ['-c', `${command(run)} | dd of=${path} bs=1M conv=fsync status=none`], {
      stdio: 'inherit',
    });
    c.on('error', reject);
    c.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`dd exit ${code}`))));
  });
  const ms = performance.now() - t0;
  await fsp.unlink(path);
  return ms;
}

function ceiling(): number {
  const buf = Buffer.alloc(64 * 1024, 'abcdefghijklmnopqrstuvwxyz0123456789\n');
  const n = Math.ceil(BYTES / buf.length);
  const hash = createHash('sha256');
  const t0 = performance.now();
  for (let i = 0; i < n; i++) hash.update(buf);
  hash.digest();
  return performance.now() - t0;
}

/** One phase's figures: its time, the CPU this process used in it (engine threads, no tool), and the host's others share. */
interface Phase {
  ms: number;
  cpuMs: number;
  othersPct: number | undefined;
}

/** Runs `fn` as a phase of {@link Phase}'s figures. */
async function phase<T>(fn: () => Promise<T>): Promise<{ value: T; phase: Phase }> {
  const h0: HostSample | undefined = hostSample();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const others = hostShare(h0, hostSample())?.othersPct;
  return { value, phase: { ms, cpuMs: Math.round((c.user + c.system) / 1000), othersPct: others } };
}

async function main(): Promise<void> {
  const tmp = tempDir('sluice-bench-capture-');
  try {
    const engine = await Engine.open({ store: join(tmp.dir, 'store'), toolOutput: {} });
    await engine.run('bash', { command: 'true' }); // warm one worker
    const sluiceMs: number[] = [];
    const baseMs: number[] = [];
    const ddMs: number[] = [];
    const rss: number[] = [];
    const sluicePhases: Phase[] = [];
    const ddPhases: Phase[] = [];
    let digestsMatch = true;
    // The order alternates: a 1 GiB write leaves writeback behind that slows whatever writes next.
    const runSluice = async (b: { digest: string }, run: number) => {
      const {
        value: { value: r, peakGrowth },
        phase: p,
      } = await phase(() => withPeakRss(() => engine.run('bash', { command: command(run) })));
      sluiceMs.push(p.ms);
      sluicePhases.push(p);
      rss.push(peakGrowth);
      const out = r.output;
      if (r.status !== 'success' || out?.kind !== 'streams') throw new Error(`bench call failed: ${r.model}`);
      digestsMatch &&= out.streams[0]?.digest === b.digest && out.streams[0]?.bytes === BYTES;
      // The blob goes, as the baseline's and dd's files do: on this VM writes slow down by half once
      // the page cache holds ~2 GiB (docs/benchmarks.md, "The page cache"), so every measurement
      // starts from the cache the others do.
      await engine.gc({ graceMs: 0 });
    };
    const runDd = async (run: number) => {
      // Its own time, without the unlink after it.
      const { value: ms, phase: p } = await phase(() => diskLimit(join(tmp.dir, 'store'), run));
      ddMs.push(ms);
      ddPhases.push({ ...p, ms });
    };
    for (let i = 0; i < RUNS; i++) {
      if (i % 2 === 0) await runDd(i);
      const b = await baseline(tmp.dir, i);
      baseMs.push(b.ms);
      await runSluice(b, i);
      if (i % 2 === 1) await runDd(i);
    }
    await engine.close();
    const ceilMs = median([ceiling(), ceiling()]);
    const s = median(sluiceMs);
    const base = median(baseMs);
    const ratio = Math.round((base / s) * 1000) / 1000;
    const dd = median(ddMs);
    const diskRatio = Math.round((dd / s) * 1000) / 1000;
    const targets = [
      target(
        'capture.baseline',
        'capture throughput ≥ 1.0× the hand-written baseline (spawn → SHA-256 → file, fsync)',
        ratio,
        '>=',
        1.0,
        'x',
      ),
      target(
        'capture.disk',
        'capture throughput ≥ 0.9× the disk limit (producer | dd conv=fsync)',
        diskRatio,
        '>=',
        0.9,
        'x',
      ),
      check('capture.digests', "every run's digest and size equal the baseline's", digestsMatch),
    ];
    report({
      bench: 'capture',
      bytes: BYTES,
      runs: RUNS,
      sluiceMs: Math.round(s),
      baselineMs: Math.round(base),
      sluiceMiBps: mibps(BYTES, s),
      baselineMiBps: mibps(BYTES, base),
      sha256CeilingMiBps: mibps(BYTES, ceilMs),
      sluiceVsCeiling: Math.round((ceilMs / s) * 1000) / 1000,
      baselineVsCeiling: Math.round((ceilMs / base) * 1000) / 1000,
      ratio,
      diskLimitMs: Math.round(dd),
      diskLimitMiBps: mibps(BYTES, dd),
      diskRatio,
      peakRssGrowthMiB: Math.round(median(rss) / 1024 / 1024),
      // Per run, in order: what a busy host does to each side (docs/benchmarks.md, "A busy host").
      sluiceMsRuns: sluicePhases.map((p) => Math.round(p.ms)),
      sluiceCpuMsRuns: sluicePhases.map((p) => p.cpuMs),
      sluiceOthersPctRuns: sluicePhases.map((p) => p.othersPct ?? null),
      diskLimitMsRuns: ddPhases.map((p) => Math.round(p.ms)),
      diskLimitOthersPctRuns: ddPhases.map((p) => p.othersPct ?? null),
      digestsMatch,
      targets,
      pass: passes(targets),
    });
  } finally {
    tmp.remove();
  }
}

await main();
