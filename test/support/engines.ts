/**
 * Shared fixtures for runtime tests: an engine per test on a store in its own
 * mkdtemp directory (closed and removed by {@link closeEngines} in afterEach),
 * paths of the fixture tool modules, blob readers that never hold a large
 * blob in memory, and the leak checks every failure path ends with.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import {
  type CallHandle,
  Engine,
  type EngineOpenOptions,
  type OutputRef,
  type TerminalResult,
} from '../../engine/index.js';
import { openBlob } from '../../store/blob-handle.js';
import { blobBytes } from '../sessions/helpers.js';
import { heldPins } from '../store/helpers.js';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));

/** Directory of the fixture tool modules. */
export const FIXTURES = resolve(here, '..', 'fixtures', 'tools');

/** Path of the fixture tool module `name` (without `.mjs`). */
export function fixture(name: string): string {
  return join(FIXTURES, `${name}.mjs`);
}

const open: Engine[] = [];
const dirs: string[] = [];

/**
 * Opens an engine on a fresh store in a new mkdtemp directory (also its cwd).
 * Each one is closed and its directory removed by {@link closeEngines}.
 */
export async function openEngine(options: EngineOpenOptions = {}): Promise<{ engine: Engine; dir: string }> {
  const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-rt-'));
  // Tracked before opening, so a failed open still gets its directory removed.
  dirs.push(dir);
  const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir, ...options });
  open.push(engine);
  return { engine, dir };
}

/** Opens an engine and registers the fixture tools `names`. */
export async function engineWith(
  names: string[],
  options: EngineOpenOptions = {},
): Promise<{ engine: Engine; dir: string }> {
  const env = await openEngine(options);
  for (const n of names) await env.engine.register(fixture(n));
  return env;
}

/** Closes every engine opened by the current test and removes its directory (use in afterEach). */
export async function closeEngines(): Promise<void> {
  for (const engine of open.splice(0)) await engine.close();
  for (const dir of dirs.splice(0)) await fsp.rm(dir, { recursive: true, force: true });
}

/** SHA-256 hex of `data`. */
export function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Path of a published blob. */
export function blobPath(engine: Engine, digest: string): string {
  return engine.store.layout.blobPath(digest);
}

/** Bytes of a small published blob, wherever the store keeps it (a file or a pack: store/blob-handle.ts). */
export function readBlob(engine: Engine, digest: string): Promise<Buffer> {
  return blobBytes(engine.store, digest);
}

/** Size of a published blob as stored (a file's size, or its packed record's length). */
export async function blobSize(engine: Engine, digest: string): Promise<number> {
  const h = await openBlob(engine.store, digest);
  try {
    return (await h.identity()).size;
  } finally {
    await h.close();
  }
}

/** SHA-256 of a stored blob's bytes, hashed while streaming (never held in memory). */
export async function hashBlobFile(engine: Engine, digest: string): Promise<string> {
  const hash = createHash('sha256');
  const h = await openBlob(engine.store, digest);
  try {
    const buf = Buffer.allocUnsafe(1024 * 1024);
    for (let position = 0; ; ) {
      const { bytesRead } = await h.read(buf, 0, buf.length, position);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
      position += bytesRead;
    }
  } finally {
    await h.close();
  }
  return hash.digest('hex');
}

/** The bytes of each published stream of a named-output result (small outputs only), by name. */
export async function streamBytes(engine: Engine, result: TerminalResult): Promise<Record<string, string>> {
  const out = result.output;
  if (out?.kind !== 'streams') throw new Error(`expected named streams, got ${JSON.stringify(out)}`);
  const texts: Record<string, string> = {};
  for (const s of out.streams) texts[s.name] = (await readBlob(engine, s.digest)).toString('utf8');
  return texts;
}

/** The text of a single-output result (small outputs only). */
export async function singleText(engine: Engine, result: TerminalResult): Promise<string> {
  const out = result.output;
  if (out?.kind !== 'single') throw new Error(`expected single output, got ${JSON.stringify(out)}`);
  return (await readBlob(engine, out.digest)).toString('utf8');
}

/**
 * Checks that an output reference is published and consistent: each blob
 * hashes to its name and has the recorded size, and reads back through the
 * public artifact URI with the recorded line count.
 */
export async function expectPublished(engine: Engine, ref: OutputRef | null): Promise<void> {
  expect(ref).not.toBeNull();
  if (ref?.kind === 'single') {
    expect(await blobSize(engine, ref.digest)).toBe(ref.bytes);
    expect(await hashBlobFile(engine, ref.digest)).toBe(ref.digest);
    const page = await engine.store.readPage(`artifact://${ref.digest}`, { limit: 1 });
    expect(page.totalLines).toBe(ref.lines);
  } else if (ref?.kind === 'streams') {
    const manifest = await engine.store.loadManifest(ref.manifest);
    expect(manifest.streams.map((s) => s.name)).toEqual(ref.streams.map((s) => s.name));
    for (const s of ref.streams) {
      expect(await blobSize(engine, s.digest)).toBe(s.bytes);
      expect(await hashBlobFile(engine, s.digest)).toBe(s.digest);
      const page = await engine.store.readPage(`artifact://${ref.manifest}/${s.name}`, { limit: 1 });
      expect(page.totalLines).toBe(s.lines);
    }
  }
}

/** Asserts the store holds no temporary files and no pins: nothing leaked from a call. */
export async function expectStoreClean(engine: Engine): Promise<void> {
  expect(await fsp.readdir(engine.store.layout.tmp)).toEqual([]);
  expect(await heldPins(engine.store.root)).toEqual([]);
}

/**
 * A long sleep no other process on the machine runs: `seconds` is the argument
 * for sleep, `marker` what pgrep finds (GNU sleep accepts a fraction, so the
 * sleep process itself carries the marker in its argv), `command` a shell
 * command running it.
 */
export function uniqueSleep(): { seconds: string; marker: string; command: string } {
  const seconds = `1000.${parseInt(randomBytes(4).toString('hex'), 16)}`;
  return { seconds, marker: `sleep ${seconds}`, command: `sleep ${seconds}` };
}

/** PIDs whose command line contains `marker`. */
export async function pgrep(marker: string): Promise<number[]> {
  try {
    const { stdout } = await run('pgrep', ['-f', marker]);
    return stdout
      .split('\n')
      .filter(Boolean)
      .map((s) => Number(s));
  } catch (err) {
    if ((err as { code?: unknown }).code === 1) return []; // pgrep: no match
    throw err;
  }
}

/**
 * Waits (up to `ms`, which only bounds a failing test) until no process has
 * `marker` in its command line; returns the survivors.
 */
export async function waitNoProcess(marker: string, ms = 30_000): Promise<number[]> {
  const until = Date.now() + ms;
  for (;;) {
    const pids = await pgrep(marker);
    if (pids.length === 0 || Date.now() > until) return pids;
    await sleep(50);
  }
}

/** Waits until some process has `marker` in its command line (up to `ms`, a failure bound). */
export async function waitProcess(marker: string, ms = 30_000): Promise<number[]> {
  const until = Date.now() + ms;
  for (;;) {
    const pids = await pgrep(marker);
    if (pids.length > 0 || Date.now() > until) return pids;
    await sleep(20);
  }
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Asserts that the engine still serves calls: a small bash call succeeds with the expected stdout. */
export async function expectPoolServes(engine: Engine): Promise<void> {
  const r = await engine.run('bash', { command: 'echo still-serving' });
  expect(r.status).toBe('success');
  expect(await streamBytes(engine, r)).toEqual({ stdout: 'still-serving\n', stderr: '' });
}

/**
 * Block `i` of the deterministic pattern the flood fixture writes: `size`
 * bytes of ASCII starting with the block number, so reordering or dropping a
 * block changes the digest. Must match test/fixtures/tools/flood.mjs.
 */
export function floodBlock(i: number, size: number): Buffer {
  const b = Buffer.alloc(size, 0x61 + (i % 26));
  b.write(`#${i}#`, 0, 'latin1');
  b[size - 1] = 0x0a;
  return b;
}

/** SHA-256 of the first `bytes` bytes of the flood pattern with blocks of `size`, generated on the fly. */
export function floodDigest(bytes: number, size: number): string {
  const hash = createHash('sha256');
  let left = bytes;
  for (let i = 0; left > 0; i++) {
    const b = floodBlock(i, size);
    hash.update(left >= size ? b : b.subarray(0, left));
    left -= size;
  }
  return hash.digest('hex');
}

/**
 * Resolves when the call shows `text` on its live display (the fixtures say
 * 'ready' once their output has been sent). Subscribe right after `call()`:
 * events are live, not replayed. Fails if the call ends first.
 */
export async function waitForDisplay(handle: CallHandle, text: string): Promise<void> {
  for await (const ev of handle.events()) {
    if (ev.type === 'display' && ev.text.includes(text)) return;
    if (ev.type === 'completed') {
      throw new Error(`the call ended before displaying ${JSON.stringify(text)}: ${JSON.stringify(ev.result.error)}`);
    }
  }
  throw new Error(`the event stream ended before ${JSON.stringify(text)} was displayed`);
}
