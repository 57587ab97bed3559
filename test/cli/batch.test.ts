/**
 * `sluice batch` as a real process: a real 10,000-line file (bad lines
 * among them) gives exactly one JSON result per non-blank line and exit 1;
 * running it again on the same session resumes (every valid line's recorded
 * result re-emitted, nothing run); --ordered keeps input order; Ctrl-C in a
 * pseudo-terminal (script(1)) stops cleanly: cancelled results written,
 * exit 130, progress line drawn, no process left.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { BatchResult } from '../../engine/batch/batch.js';
import { pgrep, sleep, uniqueSleep, waitNoProcess } from '../support/engines.js';

const here = dirname(fileURLToPath(import.meta.url));
const MAIN = resolve(here, '..', '..', 'dist', 'cli', 'main.js');
const ECHO = resolve(here, '..', 'fixtures', 'tools', 'echo.mjs');

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await fsp.mkdtemp(join(tmpdir(), 'sluice-batch-'));
  dirs.push(d);
  return d;
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function sluice(args: string[], cwd: string): Promise<Ran> {
  const child = spawn(process.execPath, [MAIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  return new Promise((res) => child.on('close', (code) => res({ code, stdout, stderr })));
}

function parseLines(text: string): BatchResult[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as BatchResult);
}

/** Writes `n` lines, streaming (never the whole file in memory); every 1000th line is not JSON. */
async function writeCalls(path: string, n: number): Promise<number> {
  const out = createWriteStream(path);
  let bad = 0;
  for (let i = 0; i < n; i++) {
    const line =
      i % 1000 === 999 ? `{broken ${i}` : JSON.stringify({ id: `c${i}`, tool: 'echo', args: { text: `line ${i}\n` } });
    if (i % 1000 === 999) bad++;
    if (!out.write(`${line}\n`)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r, j) => out.end((err?: Error | null) => (err ? j(err) : r())));
  return bad;
}

describe('sluice batch', () => {
  it('a 10,000-line file: one result per line, bad lines as errors, exit 1; run again on its session it resumes', async () => {
    const dir = await tempDir();
    const file = join(dir, 'calls.jsonl');
    const bad = await writeCalls(file, 10_000);
    const store = join(dir, 'store');
    const args = ['batch', file, '--store', store, '--session', 'big', '--plugin', ECHO, '--concurrency', '16'];
    const first = await sluice(args, dir);
    expect(first.code).toBe(1);
    const results = parseLines(first.stdout);
    expect(results).toHaveLength(10_000);
    expect(new Set(results.map((r) => r.index)).size).toBe(10_000);
    const errors = results.filter((r) => r.error);
    expect(errors).toHaveLength(bad);
    for (const e of errors) expect(e).toMatchObject({ id: null, error: { code: 'EBADARGS' } });
    for (const r of results.filter((r) => r.result)) {
      expect(r.result).toMatchObject({ callId: r.id, status: 'success', session: 'big' });
      expect(r.result?.model).toContain(`line ${r.index}`);
    }

    // Again, ordered: nothing runs; every valid line's recorded result comes back, in input order.
    const second = await sluice([...args, '--ordered'], dir);
    expect(second.code).toBe(1);
    const again = parseLines(second.stdout);
    expect(again.map((r) => r.index)).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
    const resumed = again.filter((r) => r.resumed);
    expect(resumed).toHaveLength(10_000 - bad);
    const firstById = new Map(results.map((r) => [r.id, r.result]));
    for (const r of resumed) expect(r.result).toEqual(firstById.get(r.id));
    // No call ran twice: the session has exactly one call per valid line.
    const replay = await sluice(['replay', 'big', '--store', store, '--json'], dir);
    expect(replay.code).toBe(0);
    expect((JSON.parse(replay.stdout) as { calls: unknown[] }).calls).toHaveLength(10_000 - bad);
  }, 240_000);

  it('exits 0 when every call succeeds; --ordered writes results in input order; stdin with -', async () => {
    const dir = await tempDir();
    const lines = Array.from({ length: 12 }, (_, i) =>
      JSON.stringify({ id: i, tool: 'bash', args: { command: `sleep 0.0${(12 - i) % 10}; echo ${i}` } }),
    );
    const file = join(dir, 'calls.jsonl');
    await fsp.writeFile(file, `${lines.join('\n')}\n\n`);
    const r = await sluice(['batch', file, '--store', join(dir, 'store'), '--ordered', '--concurrency', '6'], dir);
    expect(r.code).toBe(0);
    const out = parseLines(r.stdout);
    expect(out.map((x) => x.id)).toEqual(lines.map((_, i) => String(i)));
    for (const x of out) expect(x.result?.model).toContain(`${x.id}\n`);
    const piped = await new Promise<Ran>((res) => {
      const child = spawn(process.execPath, [MAIN, 'batch', '-', '--store', join(dir, 'store')], { cwd: dir });
      let stdout = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        stdout += d;
      });
      child.on('close', (code) => res({ code, stdout, stderr: '' }));
      child.stdin.end('{"id":"p","tool":"bash","args":{"command":"echo piped"}}\n');
    });
    expect(piped.code).toBe(0);
    expect(parseLines(piped.stdout)).toMatchObject([{ id: 'p', result: { status: 'success' } }]);
  });

  it('bad usage exits 2 (no file, --concurrency 0 or above 1024); a missing file is ENOTFOUND, exit 1', async () => {
    const dir = await tempDir();
    const store = join(dir, 'store');
    expect((await sluice(['batch', '--store', store], dir)).code).toBe(2);
    const missing = await sluice(['batch', join(dir, 'nope.jsonl'), '--store', store], dir);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^ENOTFOUND: no such batch file/);
    const zero = await sluice(['batch', join(dir, 'nope.jsonl'), '--concurrency', '0', '--store', store], dir);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/^EBADARGS: --concurrency/);
    // Regression: 2000 used to run as 1024 at a time without a word.
    const wide = await sluice(['batch', join(dir, 'nope.jsonl'), '--concurrency', '2000', '--store', store], dir);
    expect(wide.code).toBe(2);
    expect(wide.stderr).toMatch(/^EBADARGS: --concurrency must be at most 1024, got "2000"/);
  });

  it('Ctrl-C in a terminal stops cleanly: no new call, running ones cancelled and written, exit 130, nothing left', async () => {
    const dir = await tempDir();
    const sleeper = uniqueSleep();
    const lines = [
      ...Array.from({ length: 3 }, (_, i) => ({ id: `q${i}`, tool: 'bash', args: { command: `echo quick ${i}` } })),
      ...Array.from({ length: 20 }, (_, i) => ({ id: `s${i}`, tool: 'bash', args: { command: sleeper.command } })),
    ];
    const file = join(dir, 'calls.jsonl');
    await fsp.writeFile(file, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    const out = join(dir, 'out.jsonl');
    const cmd = `${process.execPath} ${MAIN} batch ${file} --store ${join(dir, 'store')} --session c --concurrency 3 > ${out}`;
    // script(1) gives the command a pseudo-terminal; a ^C written to it is turned into SIGINT by the terminal.
    const child = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
    let terminal = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      terminal += d;
    });
    const closed = new Promise<number | null>((res) => child.on('close', (code) => res(code)));
    // Bounded only as a failure bound: the sleeps run once the quick calls are done.
    const until = Date.now() + 60_000;
    while ((await pgrep(sleeper.marker)).length === 0 && Date.now() < until) await sleep(20);
    child.stdin.write('\x03');
    expect(await closed).toBe(130);
    const results = parseLines(await fsp.readFile(out, 'utf8'));
    const cancelled = results.filter((r) => r.result?.status === 'cancelled');
    expect(cancelled.length).toBeGreaterThanOrEqual(1);
    expect(cancelled.length).toBeLessThanOrEqual(3);
    for (const r of results) expect(['success', 'cancelled']).toContain(r.result?.status);
    // No call started after the stop: only the first few sleeps ever ran.
    expect(results.length).toBeLessThanOrEqual(6);
    expect(terminal).toMatch(/\/23 {2}[0-9.]+\/s {2}ETA/);
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    const tmp = await fsp.readdir(join(dir, 'store', 'tmp')).catch(() => []);
    expect(tmp).toEqual([]);
  });
});
