/**
 * Shared fixtures for store tests: a fresh store per test in its own mkdtemp
 * directory (removed when the test finishes), fault-injecting I/O, and a
 * counter of bytes actually read from files.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fsp, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, onTestFinished } from 'vitest';
import { WATCHDOG_NAME } from '../../engine/processes/process-guard.js';
import { StoreFile } from '../../store/file.js';
import { realIO, type StoreIO } from '../../store/io.js';
import { parsePinJournal } from '../../store/pins.js';
import { RemoteFile } from '../../store/s3/remote-file.js';
import { Store, type StoreOptions } from '../../store/store.js';

/** SHA-256 hex of `data`. */
export function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A new empty directory, removed when the current test finishes. */
export async function tempDir(prefix = 'sluice-test-'): Promise<string> {
  const dir = await fsp.mkdtemp(join(tmpdir(), prefix));
  onTestFinished(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
  });
  return dir;
}

/** A store in a new directory, removed when the current test finishes. */
export async function tempStore(options: StoreOptions = {}): Promise<Store> {
  return Store.open(join(await tempDir(), 'store'), options);
}

/** Names in the store's tmp/ (must be empty after every publish, success or failure). */
export async function tmpEntries(store: Store): Promise<string[]> {
  return fsp.readdir(store.layout.tmp);
}

/** Every file under `dir`, as paths relative to it, sorted. */
export async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(join(e.parentPath, e.name).slice(dir.length + 1));
  }
  return out.sort();
}

/** An fs-style error as Node raises it. */
export function fsError(code: string, syscall: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: injected fault, ${syscall}`), { code, syscall, errno: -1 });
}

/** `realIO` with some operations replaced. */
export function ioWith(overrides: Partial<StoreIO>): StoreIO {
  return { ...realIO, ...overrides };
}

/** Flips bit `bit` of the byte at `position` of the file at `path`, in place. */
export async function flipBit(path: string, position: number, bit = 0): Promise<void> {
  const fh = await fsp.open(path, 'r+');
  try {
    const b = Buffer.alloc(1);
    await fh.read(b, 0, 1, position);
    b[0] = (b[0] ?? 0) ^ (1 << bit);
    await fh.write(b, 0, 1, position);
  } finally {
    await fh.close();
  }
}

/**
 * Runs `fn` while counting the bytes every store file read returns, so a
 * test can tell O(page) reads from O(offset) scans without timing anything.
 */
export async function countBytesRead<T>(fn: () => Promise<T>): Promise<{ result: T; bytesRead: number }> {
  type Reader = { read: (...args: unknown[]) => Promise<{ bytesRead: number }> };
  // A remote blob (an S3 store's) is read through its own override: count both.
  const protos = [StoreFile.prototype, RemoteFile.prototype] as unknown as Reader[];
  const originals = protos.map((p) => p.read);
  let bytesRead = 0;
  protos.forEach((proto, i) => {
    const original = originals[i] as Reader['read'];
    proto.read = async function (this: unknown, ...args: unknown[]) {
      const r = await original.apply(this, args);
      bytesRead += r.bytesRead;
      return r;
    };
  });
  try {
    const result = await fn();
    return { result, bytesRead };
  } finally {
    protos.forEach((proto, i) => {
      proto.read = originals[i] as Reader['read'];
    });
  }
}

/**
 * Publishes lines `line(0) .. line(count-1)` through a streaming writer in
 * chunks of about `chunkBytes`, never holding the whole content.
 */
export async function publishGenerated(
  store: Store,
  count: number,
  line: (i: number) => string,
  chunkBytes = 1024 * 1024,
): Promise<{ digest: string; bytes: number; lines: number }> {
  const w = store.writer();
  let parts: string[] = [];
  let size = 0;
  for (let i = 0; i < count; i++) {
    const l = line(i);
    parts.push(l);
    size += l.length;
    if (size >= chunkBytes) {
      await w.write(Buffer.from(parts.join(''), 'utf8'));
      parts = [];
      size = 0;
    }
  }
  if (parts.length > 0) await w.write(Buffer.from(parts.join(''), 'utf8'));
  return w.commit();
}

/** Lines `from .. to-1` of a generator, joined: the expected content of a page. */
export function expectedPage(line: (i: number) => string, from: number, to: number): string {
  const parts: string[] = [];
  for (let i = from; i < to; i++) parts.push(line(i));
  return parts.join('');
}

/** The built CLI entry point (`npm test` builds before running tests). */
export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** The outcome of one `sluice` run. */
export interface CliRun {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/**
 * Runs `node dist/cli/main.js ...args` with a clean environment (no
 * inherited $SLUICE_STORE); with `prefix`, under that command (such as
 * test/support/permissions.ts's route to a root without DAC override).
 */
export function sluice(
  args: readonly string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; prefix?: readonly string[] } = {},
): Promise<CliRun> {
  const { SLUICE_STORE: _ignored, ...env } = process.env;
  const [file, ...argv] = [...(opts.prefix ?? []), process.execPath, CLI, ...args] as [string, ...string[]];
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, {
      cwd: opts.cwd ?? tmpdir(),
      env: { ...env, ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString('utf8') }),
    );
  });
}

/**
 * Pids of this process's live child processes (bash and anything it left),
 * except an open engine's watchdog (engine/processes/process-guard.ts), which belongs
 * to the engine, not to a call.
 */
export function childPids(): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // Fields after the command name, which is in parentheses and may contain spaces.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) !== process.pid || fields[0] === 'Z') continue;
      if (readFileSync(`/proc/${name}/cmdline`, 'latin1').split('\0')[3] === WATCHDOG_NAME) continue;
      out.push(Number(name));
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

/** Digests some pin journal in the store still holds (an open store keeps its journal, empty when idle). */
export async function heldPins(storeDir: string): Promise<string[]> {
  const held: string[] = [];
  for (const name of await fsp.readdir(join(storeDir, 'pins'))) {
    held.push(...parsePinJournal(await fsp.readFile(join(storeDir, 'pins', name), 'latin1')));
  }
  return held;
}

/** Nothing leaked: the store's tmp/ is empty, no pin is held and no child process is left. */
export async function expectNoLeaks(storeDir: string): Promise<void> {
  expect(await fsp.readdir(join(storeDir, 'tmp'))).toEqual([]);
  expect(await heldPins(storeDir)).toEqual([]);
  expect(childPids()).toEqual([]);
}
