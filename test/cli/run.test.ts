/**
 * `sluice run` as a real process: the model view or --json terminal result on
 * stdout, exit codes 0 / 1 / 2 / 130, and Ctrl-C (SIGINT) cancelling the call
 * cleanly: accepted output published, no process left, tmp/ empty.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { TerminalResult } from '../../engine/index.js';
import { sha256, uniqueSleep, waitNoProcess, waitProcess } from '../support/engines.js';

const MAIN = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'cli', 'main.js');

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

async function storeDir(): Promise<string> {
  const d = await fsp.mkdtemp(join(tmpdir(), 'sluice-cli-'));
  dirs.push(d);
  return join(d, 'store');
}

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function start(args: string[], store: string): { child: ChildProcess; done: Promise<Ran> } {
  const child = spawn(process.execPath, [MAIN, ...args, '--store', store], {
    cwd: dirname(store),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const done = new Promise<Ran>((res) => child.on('close', (code, signal) => res({ code, signal, stdout, stderr })));
  return { child, done };
}

function sluiceRun(args: string[], store: string): Promise<Ran> {
  return start(['run', ...args], store).done;
}

describe('sluice run', () => {
  it('prints the model view byte for byte (one newline at the end, never two) and exits 0 on success', async () => {
    const store = await storeDir();
    const r = await sluiceRun(['bash', '--args', JSON.stringify({ command: 'echo hello; echo warn >&2' })], store);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('[stdout]\nhello\n\n[stderr]\nwarn\n');
  });

  it('--json prints the terminal result with output references', async () => {
    const store = await storeDir();
    const r = await sluiceRun(['bash', '--args', JSON.stringify({ command: 'printf abc' }), '--json'], store);
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout) as TerminalResult;
    expect(result).toMatchObject({ tool: 'bash', status: 'success', complete: true });
    expect(result.output).toMatchObject({
      kind: 'streams',
      streams: [
        { name: 'stdout', digest: sha256('abc'), bytes: 3, lines: 1, truncated: false },
        { name: 'stderr', digest: sha256(''), bytes: 0, lines: 0, truncated: false },
      ],
    });
  });

  it('exits 1 when the tool fails', async () => {
    const store = await storeDir();
    const r = await sluiceRun(['bash', '--args', JSON.stringify({ command: 'echo out; exit 3' })], store);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('[Status: failed. exit code 3.]');
  });

  it('exits 2 with the error code on stderr for bad arguments, bad JSON and unknown tools', async () => {
    const store = await storeDir();
    const unknownField = await sluiceRun(['bash', '--args', JSON.stringify({ command: 'true', nope: 1 })], store);
    // Whole results: a failure shows the signal and stderr too.
    expect(unknownField).toMatchObject({ code: 2, signal: null });
    expect(unknownField.stderr).toMatch(/^EBADARGS: .*nope/m);
    const badJson = await sluiceRun(['bash', '--args', '{not json'], store);
    expect(badJson).toMatchObject({ code: 2, signal: null });
    expect(badJson.stderr).toMatch(/^EBADARGS: /m);
    const unknownTool = await sluiceRun(['no-such-tool'], store);
    expect(unknownTool).toMatchObject({ code: 2, signal: null });
    expect(unknownTool.stderr).toMatch(/^EUNKNOWNTOOL: /m);
  });

  it('Ctrl-C cancels the call cleanly: exit 130, accepted output published, no process left, tmp/ empty', async () => {
    const store = await storeDir();
    const sleeper = uniqueSleep();
    // The marker must not appear in the CLI's own argv (pgrep -f would find the CLI), hence the variable.
    const command = `echo started; S=${sleeper.seconds}; sleep $S`;
    const { child, done } = start(['run', 'bash', '--args', JSON.stringify({ command }), '--json'], store);
    expect(await waitProcess(sleeper.marker, 20_000)).not.toEqual([]);
    child.kill('SIGINT');
    const r = await done;
    expect(r.code).toBe(130);
    const result = JSON.parse(r.stdout) as TerminalResult;
    expect(result).toMatchObject({ status: 'cancelled', complete: false, error: { code: 'ECANCELLED' } });
    expect(result.output).toMatchObject({
      kind: 'streams',
      streams: [{ name: 'stdout', digest: sha256('started\n') }, {}],
    });
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    expect(await fsp.readdir(join(store, 'tmp'))).toEqual([]);
    expect(await fsp.readdir(join(store, 'pins'))).toEqual([]);
  });
});
