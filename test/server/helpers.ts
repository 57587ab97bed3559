/**
 * Shared fixtures of the HTTP server tests: a real server on loopback (port
 * 0) over an engine on a store in its own mkdtemp directory, an authenticated
 * fetch, a server-sent-events reader, a raw-socket subscriber that can stall,
 * and a `sluice serve` child process.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { promises as fsp, readFileSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { Engine, type EngineOpenOptions } from '../../engine/index.js';
import { loadOrCreateToken } from '../../server/auth.js';
import { type ServerOptions, type SluiceServer, startServer } from '../../server/server.js';
import { expectNoLeaks as expectStoreNoLeaks } from '../store/helpers.js';

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root. */
export const ROOT = resolve(here, '..', '..');
/** The built CLI. */
export const CLI = join(ROOT, 'dist', 'cli', 'main.js');

/** Path of a fixture tool module: `tools/<name>.mjs` or `server/<name>.mjs` under test/fixtures. */
export function fixture(name: string): string {
  const own = join(ROOT, 'test', 'fixtures', 'server', `${name}.mjs`);
  try {
    readFileSync(own);
    return own;
  } catch {
    return join(ROOT, 'test', 'fixtures', 'tools', `${name}.mjs`);
  }
}

/** A server under test and how to talk to it. */
export interface TestServer {
  engine: Engine;
  server: SluiceServer;
  url: string;
  token: string;
  dir: string;
  storeDir: string;
  /** fetch with the bearer token (unless `headers.authorization` is given). */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** POST /v1/calls; returns the call id (expects 202). */
  start(tool: string, args: unknown, extra?: Record<string, unknown>): Promise<string>;
}

const servers: Array<{ server: SluiceServer; engine: Engine; dir: string }> = [];
const dirs: string[] = [];

/** A new mkdtemp directory removed by {@link cleanup}. */
export async function tempDir(prefix = 'sluice-srv-'): Promise<string> {
  const dir = await fsp.mkdtemp(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/** Starts an engine (with fixture tools `tools`) and a server on it, on 127.0.0.1 port 0. */
export async function startTestServer(
  tools: string[] = [],
  options: Partial<ServerOptions> = {},
  engineOptions: EngineOpenOptions = {},
): Promise<TestServer> {
  const dir = await tempDir();
  const storeDir = join(dir, 'store');
  const engine = await Engine.open({ store: storeDir, cwd: dir, ...engineOptions });
  for (const t of tools) await engine.register(fixture(t));
  const { token } = await loadOrCreateToken(engine.store.root);
  const server = await startServer(engine, { token, port: 0, ...options });
  servers.push({ server, engine, dir });
  const url = server.url;
  const api = (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has('authorization')) headers.set('authorization', `Bearer ${token}`);
    return fetch(`${url}${path}`, { ...init, headers });
  };
  const start = async (tool: string, args: unknown, extra: Record<string, unknown> = {}) => {
    const res = await api('/v1/calls', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tool, args, ...extra }),
    });
    const body = (await res.json()) as { callId?: string; error?: unknown };
    expect(res.status, JSON.stringify(body)).toBe(202);
    return body.callId as string;
  };
  return { engine, server, url, token, dir, storeDir, api, start };
}

/** Closes every server and engine of the test and removes their directories (use in afterEach). */
export async function cleanup(): Promise<void> {
  for (const { server, engine } of servers.splice(0)) {
    await server.close();
    await engine.close();
  }
  for (const dir of dirs.splice(0)) await fsp.rm(dir, { recursive: true, force: true });
}

/** One server-sent event. */
export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

/** Parses SSE text into events (comments and `retry:` skipped). */
export function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    let id: string | undefined;
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    if (data.length > 0) out.push({ id, event, data: data.join('\n') });
  }
  return out;
}

/**
 * Reads events from an event-stream response as they arrive. `stopAfter`
 * stops (and cancels the body) once that many events were read.
 */
export async function readEvents(res: Response, stopAfter = Number.POSITIVE_INFINITY): Promise<SseEvent[]> {
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
  const events: SseEvent[] = [];
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      const end = buf.lastIndexOf('\n\n');
      if (end === -1) continue;
      events.push(...parseSse(buf.slice(0, end + 2)));
      buf = buf.slice(end + 2);
      if (events.length >= stopAfter) return events.slice(0, stopAfter);
    }
    events.push(...parseSse(buf));
    return events;
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** The numeric ids of events, asserting each has one. */
export function ids(events: SseEvent[]): number[] {
  return events.map((e) => {
    expect(e.id).toMatch(/^[0-9]+$/);
    return Number(e.id);
  });
}

/**
 * A raw-socket subscriber: sends the request and then does not read at all
 * (the socket is paused), so the server's writes back up into the kernel's
 * buffers and then into its own bounded queue. {@link drainRaw} reads it later.
 */
export function rawSubscribe(url: string, path: string, token: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolvePromise, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.pause();
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${token}\r\n\r\n`);
      resolvePromise(socket);
    });
    socket.once('error', reject);
  });
}

/** Reads a raw subscriber's whole response (until the server ends it) and returns its decoded, de-chunked body. */
export async function drainRaw(socket: Socket): Promise<{ head: string; body: string }> {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.resume();
  await new Promise<void>((done, fail) => {
    const check = () => {
      // The chunked body ends with a zero-length chunk.
      const tail = Buffer.concat(chunks.slice(-2)).toString('latin1');
      if (tail.endsWith('\r\n0\r\n\r\n')) {
        socket.destroy();
        done();
      }
    };
    socket.on('data', check);
    socket.once('end', () => done());
    socket.once('error', fail);
  });
  const raw = Buffer.concat(chunks);
  const split = raw.indexOf('\r\n\r\n');
  const head = raw.subarray(0, split).toString('latin1');
  const parts: Buffer[] = [];
  let i = split + 4;
  for (;;) {
    const eol = raw.indexOf('\r\n', i);
    const size = Number.parseInt(raw.subarray(i, eol).toString('latin1'), 16);
    if (!(size > 0)) break;
    parts.push(raw.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
  return { head, body: Buffer.concat(parts).toString('utf8') };
}

/** A `sluice serve` child process. */
export interface ServeChild {
  child: ChildProcess;
  url: string;
  /** Everything the child printed on stdout so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal name) once the child exits. */
  exited: Promise<number | string>;
}

/**
 * Spawns `sluice serve --port 0 ...args` and waits for its listening line;
 * with `fdLimit`, under `ulimit -n fdLimit`.
 */
export async function spawnServe(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  opts: { fdLimit?: number } = {},
): Promise<ServeChild> {
  const argv = [CLI, 'serve', '--port', '0', ...args];
  const child =
    opts.fdLimit === undefined
      ? spawn(process.execPath, argv, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('sh', ['-c', `ulimit -n ${opts.fdLimit} && exec "$0" "$@"`, process.execPath, ...argv], {
          cwd: ROOT,
          env: { ...process.env, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString('utf8');
  });
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString('utf8');
  });
  const exited = new Promise<number | string>((done) =>
    child.once('exit', (code, signal) => done(code ?? signal ?? 'unknown')),
  );
  const url = await new Promise<string>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`sluice serve did not start: ${out}${err}`)), 20_000);
    const onData = () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m && out.endsWith('\n')) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        done(m[1] as string);
      }
    };
    child.stdout?.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      fail(new Error(`sluice serve exited ${code}: ${out}${err}`));
    });
  });
  return { child, url, stdout: () => out, stderr: () => err, exited };
}

/** The token printed by a first start of `sluice serve` (the line after the announcement). */
export function printedToken(stdout: string): string | undefined {
  return /new API token[^\n]*\n([0-9a-f]{64})\n/.exec(stdout)?.[1];
}

/** Resident and peak resident memory of process `pid` in bytes (Linux /proc). */
export function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** Resets the peak resident set (VmHWM) of process `pid` to its current size, so the next peak is one run's own. */
export function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Nothing leaked from the server's calls: the store's tmp/ and pins/ are empty and no child process is left. */
export function expectNoLeaks(s: { storeDir: string }): Promise<void> {
  return expectStoreNoLeaks(s.storeDir);
}
