/**
 * `sluice serve` on the command line: listed in the help, its own --help,
 * usage mistakes exit 2 with a code, a busy port exits 2 (EBADOPTION) and
 * leaves no unseen token behind.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { TOKEN_FILE } from '../../server/auth.js';
import { CLI, cleanup, tempDir } from './helpers.js';

const run = promisify(execFile);
afterEach(cleanup);

async function sluice(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('sluice serve command line', () => {
  it('is listed in sluice --help and has its own --help', async () => {
    const help = await sluice(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^ {2}serve +serve the HTTP API/m);
    const own = await sluice(['serve', '--help']);
    expect(own.code).toBe(0);
    expect(own.stdout).toMatch(/^Usage: sluice serve \[--port N\] \[--host ADDR\]/);
    expect(own.stdout).toContain('--subscriber-queue');
  });

  it('usage mistakes exit 2 with their code', async () => {
    const store = join(await tempDir(), 'store');
    for (const [args, code] of [
      [['--port', 'abc'], 'EBADARGS'],
      [['--port', '70000'], 'EBADARGS'],
      [['--subscriber-queue', '0'], 'EBADARGS'],
      [['extra'], 'EBADARGS'],
      [['--bogus'], 'EBADOPTION'],
    ] as const) {
      const r = await sluice(['serve', '--store', store, ...args]);
      expect([args, r.code, r.stderr.split(':')[0]]).toEqual([args, 2, code]);
    }
  });

  it('a busy port exits 2 with EBADOPTION and does not keep a token nobody saw', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const store = join(await tempDir(), 'store');
      const r = await sluice(['serve', '--store', store, '--port', String(port)]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^EBADOPTION: cannot listen on 127\.0\.0\.1:\d+/);
      expect(r.stdout).toBe('');
      await expect(fsp.stat(join(store, TOKEN_FILE))).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      blocker.close();
    }
  });
});
