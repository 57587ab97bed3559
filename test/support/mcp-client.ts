/**
 * The official SDK's `Client` against `sluice mcp` (a real process over
 * stdio) or `sluice serve`'s `/mcp` (Streamable HTTP), each on a store in a
 * mkdtemp directory; helpers to follow a model view's read hint and to read
 * a process's memory.
 */
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { promises as fsp, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The built CLI. */
export const MAIN = join(ROOT, 'dist', 'cli', 'main.js');

const dirs: string[] = [];

/** A new temporary directory, removed by {@link removeDirs}. */
export async function tempDir(): Promise<string> {
  const d = await fsp.mkdtemp(join(tmpdir(), 'sluice-mcp-'));
  dirs.push(d);
  return d;
}

/** Removes every directory {@link tempDir} made. */
export async function removeDirs(): Promise<void> {
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
}

/** A connected client and the pid of the `sluice mcp` it spawned. */
export interface StdioSession {
  client: Client;
  pid: number;
  stderr: () => string;
  close(): Promise<void>;
}

/** Spawns `sluice mcp ...args` in `cwd` (store `<cwd>/store`) with the SDK's stdio transport and connects. */
export async function connectStdio(cwd: string, args: string[] = []): Promise<StdioSession> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MAIN, 'mcp', '--store', join(cwd, 'store'), ...args],
    cwd,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString('utf8')).slice(-8192);
  });
  const client = new Client({ name: 'sluice-test', version: '1.0.0' });
  await client.connect(transport);
  const pid = transport.pid as number;
  return {
    client,
    pid,
    stderr: () => stderr,
    close: async () => {
      await client.close();
      await exited(pid);
    },
  };
}

/** Resolves once process `pid` is gone (polling, up to 15 s). */
export async function exited(pid: number, ms = 15_000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`process ${pid} did not exit`);
}

/** A running `sluice serve` on a free port. */
export interface Served {
  url: string;
  token: string;
  child: ChildProcessByStdio<null, Readable, Readable>;
  stop(): Promise<number | null>;
}

/** Starts `sluice serve --port 0 ...args` in `cwd` and waits for its banner. */
export async function serve(cwd: string, args: string[] = []): Promise<Served> {
  const child = spawn(process.execPath, [MAIN, 'serve', '--port', '0', '--store', join(cwd, 'store'), ...args], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise<string>((res, rej) => {
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) res(m[1] as string);
    });
    child.once('exit', (code) => rej(new Error(`sluice serve exited ${code}`)));
  });
  child.stderr.resume();
  const token = readFileSync(join(cwd, 'store', 'server.token'), 'utf8').trim();
  const gone = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    url,
    token,
    child,
    stop: () => {
      child.kill('SIGINT');
      return gone;
    },
  };
}

/** An SDK client connected to `/mcp` of a served sluice with its bearer token. */
export async function connectHttp(
  served: Served,
  query = '',
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${served.url}/mcp${query}`), {
    requestInit: { headers: { authorization: `Bearer ${served.token}` } },
  });
  const client = new Client({ name: 'sluice-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** The text content of a tool result (its model view). */
export function textOf(r: unknown): string {
  const content = (r as CallToolResult).content;
  const first = content[0];
  if (first?.type !== 'text') throw new Error(`no text content in ${JSON.stringify(r).slice(0, 200)}`);
  return first.text;
}

/** The `read(filePath="…", offset=N)` call a model view's hint gives. */
export function readHint(text: string): { filePath: string; offset: number } {
  const m = /read\(filePath="(artifact:\/\/[^"]+)", offset=(\d+)\)/.exec(text);
  if (!m) throw new Error(`no read hint in ${JSON.stringify(text.slice(-400))}`);
  return { filePath: m[1] as string, offset: Number(m[2]) };
}

/** Resident and peak resident memory of process `pid`, in MiB. */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

/** PIDs whose command line contains `marker`, this process's own excepted. */
export function pidsWith(marker: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmd.includes(marker) && Number(name) !== process.pid) pids.push(Number(name));
    } catch {
      // Gone between the listing and the read.
    }
  }
  return pids;
}
