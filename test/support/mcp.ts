/**
 * Shared fixtures of the adapter tests: an engine per test in its own mkdtemp
 * directory, the SDK-written MCP fixture server started with a unique marker
 * argument (so pgrep finds exactly its processes), the big-text pattern the
 * server returns (hashed on the fly here, never held whole), and the leak
 * checks every test ends with.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { Engine, type EngineOpenOptions, type McpServerConfig, type ToolInfo } from '../../engine/index.js';

const exec = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));

/** The MCP fixture server (test/fixtures/mcp-server.mjs). */
export const MCP_SERVER = resolve(here, '..', 'fixtures', 'mcp-server.mjs');

/** The MCP server whose large responses misbehave (test/fixtures/mcp-bad-server.mjs). */
export const BAD_SERVER = resolve(here, '..', 'fixtures', 'mcp-bad-server.mjs');

/** The hand-written MCP server for wire-level misbehaviour (test/fixtures/mcp-raw-server.mjs). */
export const RAW_SERVER = resolve(here, '..', 'fixtures', 'mcp-raw-server.mjs');

/** Path of the plugin fixture `name` (without `.mjs`). */
export function plugin(name: string): string {
  return resolve(here, '..', 'fixtures', 'plugins', `${name}.mjs`);
}

/** One test's engine, its directory and the marker of its MCP server processes. */
export interface TestEnv {
  engine: Engine;
  dir: string;
  marker: string;
  tools: ToolInfo[];
}

const open: TestEnv[] = [];

/** A string that appears in no other process's command line. */
export function uniqueMarker(): string {
  return `sluice-mcp-test-${randomBytes(6).toString('hex')}`;
}

/** Opens an engine on a fresh store in a new mkdtemp directory (also its cwd). */
export async function openEngine(options: EngineOpenOptions = {}): Promise<TestEnv> {
  const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-adapters-'));
  const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir, ...options });
  const env: TestEnv = { engine, dir, marker: uniqueMarker(), tools: [] };
  open.push(env);
  return env;
}

/** The fixture server's configuration under `name`, marked with `marker`. */
export function fixtureServer(name: string, marker: string, extra: Partial<McpServerConfig> = {}): McpServerConfig {
  return { name, command: process.execPath, args: [MCP_SERVER, marker], ...extra };
}

/** Opens an engine and adds the fixture server as `fx`. */
export async function openMcpEngine(
  options: EngineOpenOptions = {},
  server: Partial<McpServerConfig> = {},
): Promise<TestEnv> {
  const env = await openEngine(options);
  env.tools = await env.engine.addMcpServer(fixtureServer('fx', env.marker, server));
  return env;
}

/**
 * Closes the engine and checks that nothing leaked: no process carrying the
 * marker, no temporary file, no pin. Every test ends with it.
 */
export async function finish(env: TestEnv): Promise<void> {
  await env.engine.close();
  expect(await waitNoProcess(env.marker)).toEqual([]);
  expect(await fsp.readdir(env.engine.store.layout.tmp)).toEqual([]);
  expect(await fsp.readdir(env.engine.store.layout.pins)).toEqual([]);
}

/** Closes whatever a failed test left open and removes the directories (use in afterEach). */
export async function cleanup(): Promise<void> {
  for (const env of open.splice(0)) {
    await env.engine.close();
    await fsp.rm(env.dir, { recursive: true, force: true });
  }
}

/** PIDs whose command line contains `marker`. */
export async function pgrep(marker: string): Promise<number[]> {
  try {
    const { stdout } = await exec('pgrep', ['-f', marker]);
    return stdout.split('\n').filter(Boolean).map(Number);
  } catch (err) {
    if ((err as { code?: unknown }).code === 1) return [];
    throw err;
  }
}

/** Waits (up to `ms`) until no process carries `marker`; returns the survivors. */
export async function waitNoProcess(marker: string, ms = 30_000): Promise<number[]> {
  const until = Date.now() + ms;
  for (;;) {
    const pids = await pgrep(marker);
    if (pids.length === 0 || Date.now() > until) return pids;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Line `i` of the fixture's big text: 64 bytes ending in a newline. Must match test/fixtures/mcp-server.mjs. */
export function bigLine(i: number): string {
  const head = `${String(i).padStart(8, '0')} `;
  return `${head}${'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ'.slice(0, 63 - head.length)}\n`;
}

/** SHA-256 of the first `bytes` bytes of the big text, generated line by line. */
export function bigDigest(bytes: number): string {
  const hash = createHash('sha256');
  let left = bytes;
  for (let i = 0; left > 0; i++) {
    const line = bigLine(i);
    hash.update(left >= line.length ? line : line.slice(0, left));
    left -= line.length;
  }
  return hash.digest('hex');
}

/** The fixture server's counters, through an ordinary call of `fx.stats`. */
export async function serverStats(engine: Engine): Promise<{ pid: number; calls: number; cancelled: number }> {
  const r = await engine.run('fx.stats', {});
  expect(r.status).toBe('success');
  return JSON.parse(r.model);
}

/** Descriptors of this process open on a spill file of `env`'s store. */
export async function openSpillFiles(env: TestEnv): Promise<string[]> {
  const fds = await fsp.readdir('/proc/self/fd');
  const links = await Promise.all(fds.map((fd) => fsp.readlink(`/proc/self/fd/${fd}`).catch(() => '')));
  return links.filter((l) => l.startsWith(`${env.engine.store.layout.tmp}/`) && l.includes('.mcp-spill'));
}

/** Bytes of the spill files of `env`'s store this process holds open (each file counted once). */
export async function heldSpillBytes(env: TestEnv): Promise<number> {
  const fds = await fsp.readdir('/proc/self/fd');
  const seen = new Map<string, number>();
  for (const fd of fds) {
    const link = await fsp.readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (!link.startsWith(`${env.engine.store.layout.tmp}/`) || !link.includes('.mcp-spill')) continue;
    const st = await fsp.stat(`/proc/self/fd/${fd}`).catch(() => undefined);
    if (st) seen.set(`${st.dev}:${st.ino}`, st.size);
  }
  return [...seen.values()].reduce((a, b) => a + b, 0);
}

/**
 * Waits (up to `ms`) until the call's end has reached the host (a message
 * apart) and any terminated worker's descriptor has gone, then checks
 * nothing is left.
 */
export async function expectNoSpill(env: TestEnv, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while ((await openSpillFiles(env)).length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  expect(await openSpillFiles(env)).toEqual([]);
  expect(await fsp.readdir(env.engine.store.layout.tmp)).toEqual([]);
}
