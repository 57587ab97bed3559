/**
 * Shared fixtures for the session tests: snapshots of the store's files,
 * ageing blobs past the grace period, pids of processes that are certainly
 * dead, hand-written log lines, and synthetic terminal results for
 * publishing through Store + pin + recorder without an engine.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import xxhash from 'xxhash-wasm';
import type { ToolInfo } from '../../engine/registry.js';
import type { OutputRef, TerminalResult } from '../../engine/result.js';
import type { SessionRecorder } from '../../engine/sessions/recorder.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import { openBlob } from '../../store/blob-handle.js';
import { openVerifiedBlob } from '../../store/integrity.js';
import { encodeManifest } from '../../store/manifest.js';
import { listPacks } from '../../store/pack-index.js';
import type { Store } from '../../store/store.js';

/** SHA-256 hex of `data`. */
export function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Every regular file under `dir` with its size and mtime in ns (`path size mtimeNs`), sorted. */
export async function snapshot(dir: string): Promise<string[]> {
  const out: string[] = [];
  const entries = await fsp.readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isFile()) continue;
    const p = join(e.parentPath, e.name);
    const st = await fsp.stat(p, { bigint: true });
    out.push(`${p.slice(dir.length + 1)} ${st.size} ${st.mtimeNs}`);
  }
  return out.sort();
}

/** Digests of every blob in the store, files and packed ones alike, sorted and once each. */
export async function blobDigests(store: Store): Promise<string[]> {
  const out = new Set<string>();
  for (const prefix of await fsp.readdir(store.layout.blobs).catch(() => [] as string[])) {
    for (const rest of await fsp.readdir(join(store.layout.blobs, prefix))) out.add(prefix + rest);
  }
  for (const p of await listPacks(store)) for (const e of p.entries) out.add(e.digest);
  return [...out].sort();
}

/** The bytes of blob `digest` through the store's read seam (a file or a pack), unverified. */
export async function blobBytes(store: Store, digest: string): Promise<Buffer> {
  const h = await openBlob(store, digest);
  try {
    const { size } = await h.identity();
    const buf = Buffer.alloc(size);
    let off = 0;
    while (off < size) {
      const { bytesRead } = await h.read(buf, off, size - off, off);
      if (bytesRead === 0) break;
      off += bytesRead;
    }
    return buf.subarray(0, off);
  } finally {
    await h.close();
  }
}

/** Sets the mtime of every blob, pack (and index file) `ms` into the past, as if time had passed. */
export async function ageStore(store: Store, ms: number): Promise<void> {
  const when = new Date(Date.now() - ms);
  for (const base of [store.layout.blobs, store.layout.index, store.layout.packs]) {
    const entries = await fsp.readdir(base, { withFileTypes: true, recursive: true }).catch(() => []);
    for (const e of entries) if (e.isFile()) await fsp.utimes(join(e.parentPath, e.name), when, when);
  }
}

/** Sets the mtime of one file `ms` into the past. */
export async function age(path: string, ms: number): Promise<void> {
  const when = new Date(Date.now() - ms);
  await fsp.utimes(path, when, when);
}

/** The pid of a process that has exited and been reaped (so it is certainly not alive). */
export async function deadPid(): Promise<number> {
  const child = spawn('true', { stdio: 'ignore' });
  const pid = child.pid as number;
  await new Promise((r) => child.once('exit', r));
  return pid;
}

/**
 * Digests among `digests` that a reader cannot open (through the store's
 * real read path, which also finds a blob a collection has moved aside for
 * an instant): what "missing" means to anyone holding the URI.
 */
export async function unreadable(store: Store, digests: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const d of digests) {
    try {
      await (await openVerifiedBlob(store, d)).close();
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'ENOTFOUND') throw err;
      out.push(d);
    }
  }
  return out;
}

/** True when every blob's content hashes to its name. */
export async function allBlobsIntact(store: Store): Promise<boolean> {
  for (const d of await blobDigests(store)) {
    if (sha256(await blobBytes(store, d)) !== d) return false;
  }
  return true;
}

/** One framed log line for `record`, computed independently of the code under test. */
export async function framedLine(record: unknown): Promise<string> {
  const h = await xxhash();
  const json = JSON.stringify(record);
  return `${h.h64ToString(json).padStart(16, '0')} ${json}\n`;
}

/** A tool as the recorder sees it, for recorder tests (its module is never loaded). */
export const SYNTHETIC_TOOL: ToolInfo = {
  name: 'synthetic',
  description: '',
  output: { kind: 'streams', streams: ['out', 'err'] },
  selfPaginating: false,
  isolation: 'shared',
  argsSchema: {},
  module: 'synthetic.mjs',
  source: 'plugin',
};

/** The lines of a session's event log file, without their newlines. */
export async function logLines(store: Store, session: string): Promise<string[]> {
  const text = await fsp.readFile(eventLogPath(store.layout, session), 'utf8');
  return text.split('\n').slice(0, -1);
}

/** A terminal result for a streams output, for recorder tests. */
export function streamsResult(
  callId: string,
  session: string,
  manifest: string,
  streams: Array<{ name: string; digest: string; bytes: number; lines: number }>,
): TerminalResult {
  const output: OutputRef = { kind: 'streams', manifest, streams: streams.map((s) => ({ ...s, truncated: false })) };
  return {
    callId,
    tool: 'synthetic',
    session,
    status: 'success',
    complete: true,
    display: `synthetic ${callId}`,
    model: streams.map((s) => `[${s.name}]\n(${s.bytes} bytes)\n`).join('\n'),
    output,
    metadata: {},
    attachments: [],
    messages: [],
    startedAt: new Date().toISOString(),
    durationMs: 1,
  };
}

/**
 * Publishes a two-stream output the way the engine does (pin → blobs →
 * manifest → durable record → release) and returns the result and every
 * digest it references.
 */
export async function publishCall(
  store: Store,
  recorder: SessionRecorder,
  session: string,
  callId: string,
  texts: { out: string; err: string },
): Promise<{ result: TerminalResult; digests: string[] }> {
  const pin = await store.pin();
  try {
    const entries = [];
    for (const [name, text] of [
      ['out', texts.out],
      ['err', texts.err],
    ] as const) {
      const info = await store.publishBytes(text, undefined, pin);
      entries.push({ name, digest: info.digest, bytes: info.bytes, lines: info.lines });
    }
    const manifest = await store.publishBytes(encodeManifest(entries), undefined, pin);
    const result = streamsResult(callId, session, manifest.digest, entries);
    await recorder.completed(result);
    return { result, digests: [manifest.digest, ...entries.map((e) => e.digest)] };
  } finally {
    await pin.release();
  }
}
