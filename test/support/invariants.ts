/**
 * Shared pieces of the hardening suites: the soak factor, the invariants
 * every fault, crash and fuzz case ends with (nothing half-published,
 * nothing referenced missing, nothing leaked), and small utilities.
 *
 * Soak runs: `SLUICE_SOAK=1` multiplies iterations and sizes by 10,
 * `SLUICE_SOAK_FACTOR=N` by N (docs/operations.md).
 */
import { createHash, randomBytes } from 'node:crypto';
import { promises as fsp, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { verifyWithSessions } from '../../engine/sessions/verify-references.js';
import { listPacks } from '../../store/pack-index.js';
import type { Store } from '../../store/store.js';
import { heldPins } from '../store/helpers.js';

/** How much longer soak runs are: 1 normally, 10 with SLUICE_SOAK=1, N with SLUICE_SOAK_FACTOR=N. */
export const SOAK: number = (() => {
  const f = Number(process.env.SLUICE_SOAK_FACTOR);
  if (Number.isFinite(f) && f >= 1) return Math.floor(f);
  const s = process.env.SLUICE_SOAK;
  return s && s !== '0' ? 10 : 1;
})();

/** `n` scaled by the soak factor. */
export function soak(n: number): number {
  return n * SOAK;
}

/** A test timeout scaled by the soak factor. */
export function soakTimeout(ms: number): number {
  return ms * SOAK;
}

/** SHA-256 hex of `data`. */
export function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A short random tag: makes content (and so digests) unique to one iteration. */
export function tag(): string {
  return randomBytes(6).toString('hex');
}

/** A tiny deterministic PRNG (mulberry-like), so a failing random run can be replayed from its seed. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    s = (s ^ (s >>> 13)) >>> 0;
    return s / 2 ** 32;
  };
}

/** A new empty directory under the system temp dir; remove it with {@link removeDir}. */
export function makeTempDir(prefix = 'sluice-hard-'): Promise<string> {
  return fsp.mkdtemp(join(tmpdir(), prefix));
}

/** Removes a directory tree (ignoring a missing one). */
export function removeDir(dir: string): Promise<void> {
  return fsp.rm(dir, { recursive: true, force: true });
}

/** Every entry (files and directories) under `dir`, relative, sorted; [] for a missing dir. */
export async function entriesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const all = await fsp.readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  for (const e of all) out.push(join(e.parentPath, e.name).slice(dir.length + 1));
  return out.sort();
}

/** Names in the store's tmp/, and the digests its pin journals still hold. */
export async function leftovers(store: Store): Promise<{ tmp: string[]; pins: string[] }> {
  return { tmp: await fsp.readdir(store.layout.tmp), pins: await heldPins(store.root) };
}

/** Asserts tmp/ is empty and no pin is held. */
export async function expectNoLeftovers(store: Store, context = ''): Promise<void> {
  expect(await leftovers(store), context).toEqual({ tmp: [], pins: [] });
}

/**
 * Asserts that nothing half-published is visible: every blob's content
 * hashes to its name, no intact manifest references a missing blob, and no
 * live session record references a missing blob; no torn log lines unless
 * `tornLinesOk`.
 */
export async function expectNoHalfState(store: Store, context = '', tornLinesOk = false): Promise<void> {
  const report = await verifyWithSessions(store);
  expect(
    { corrupt: report.corrupt, missing: report.missing, records: report.records, unexpected: report.unexpected },
    context,
  ).toEqual({ corrupt: [], missing: [], records: [], unexpected: [] });
  if (!tornLinesOk) expect(report.corruptLines, context).toBe(0);
}

/** Digests of every blob in the store, sorted. */
export async function blobDigests(store: Store): Promise<string[]> {
  const out = new Set<string>();
  for (const prefix of await fsp.readdir(store.layout.blobs).catch(() => [] as string[])) {
    for (const rest of await fsp.readdir(join(store.layout.blobs, prefix))) out.add(prefix + rest);
  }
  // Small blobs are packed (docs/store.md, "Packs").
  for (const p of await listPacks(store)) for (const e of p.entries) out.add(e.digest);
  return [...out].sort();
}

/** Sets the mtime of every blob and index file `ms` into the past, as if that much time had passed. */
export async function ageBlobs(store: Store, ms: number): Promise<void> {
  const when = new Date(Date.now() - ms);
  for (const base of [store.layout.blobs, store.layout.index, store.layout.packs]) {
    const all = await fsp.readdir(base, { withFileTypes: true, recursive: true }).catch(() => []);
    for (const e of all) if (e.isFile()) await fsp.utimes(join(e.parentPath, e.name), when, when);
  }
}

/** `pid: command line` of each process, for failure messages (a process that is gone shows as such). */
export function describeProcesses(pids: readonly number[]): string[] {
  return pids.map((pid) => {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
      return `${pid} (parent ${ppid}): ${cmd}`;
    } catch {
      return `${pid}: gone`;
    }
  });
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Rejects with a clear message when `p` takes longer than `ms`: a hang fails the test instead of stalling it. */
export async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms (a hang)`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
