/**
 * Shared helpers for benchmarks: medians, RSS sampling, temporary stores.
 * Every benchmark prints one JSON object on stdout.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Median of numbers. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** Samples RSS every few ms while `fn` runs; returns its result and the peak growth over the starting RSS. */
export async function withPeakRss<T>(fn: () => Promise<T>): Promise<{ value: T; peakGrowth: number }> {
  const start = process.memoryUsage.rss();
  let peak = start;
  const timer = setInterval(() => {
    const r = process.memoryUsage.rss();
    if (r > peak) peak = r;
  }, 10);
  try {
    const value = await fn();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { value, peakGrowth: peak - start };
  } finally {
    clearInterval(timer);
  }
}

/** A fresh directory removed by the returned function. */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Integer from an environment variable, or the default. */
export function envInt(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(v)}`);
  return Math.floor(n);
}

/** MiB/s for `bytes` in `ms`. */
export function mibps(bytes: number, ms: number): number {
  return Math.round((bytes / (1024 * 1024) / (ms / 1000)) * 10) / 10;
}

/** Prints the result object as JSON. */
export function report(result: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/**
 * Generated content, a chunk at a time: yields the lines `line(0), line(1), ...`
 * as UTF-8 buffers of about `chunk` bytes until `bytes` bytes, so a benchmark
 * never holds more than one chunk of what it generates.
 */
export function* generatedChunks(line: (i: number) => string, bytes: number, chunk = 1024 * 1024): Generator<Buffer> {
  let written = 0;
  let i = 0;
  while (written < bytes) {
    const parts: string[] = [];
    let size = 0;
    while (size < chunk && written + size < bytes) {
      const l = line(i++);
      parts.push(l);
      size += Buffer.byteLength(l);
    }
    const buf = Buffer.from(parts.join(''), 'utf8');
    written += buf.length;
    yield buf;
  }
}

/**
 * Runs jobs `0..n-1`, `width` at a time; resolves to the wall time in ms.
 * With `latencies`, each job's own time is pushed there (left out otherwise:
 * the overhead benchmark counts microseconds per call).
 */
export async function inFlight(
  n: number,
  width: number,
  one: (i: number) => Promise<void>,
  latencies?: number[],
): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        if (!latencies) {
          await one(i);
          continue;
        }
        const s = performance.now();
        await one(i);
        latencies.push(performance.now() - s);
      }
    }),
  );
  return performance.now() - t0;
}
