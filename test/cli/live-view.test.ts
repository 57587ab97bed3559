/**
 * The live view of `sluice run` in a real pseudo-terminal (tmux, read back
 * with capture-pane): the status area ticks while the tool is silent, counts
 * bytes and lines per stream, shows only complete lines, and is replaced by
 * the final display, then the model view. Without a terminal nothing is
 * drawn. Every wait is for a state of the screen; the bounds only fail a
 * test that would otherwise hang.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const MAIN = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'cli', 'main.js');
const HAVE_TMUX = spawnSync('tmux', ['-V']).status === 0;
const BOUND_MS = 60_000;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * tmux runs a pane's command with $SHELL, else the user's login shell, which
 * for an account such as `nobody` is nologin: the pane would exit at once.
 */
const TMUX_ENV = { ...process.env, SHELL: '/bin/sh' };

function tmux(socket: string, args: string[]): string {
  return execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8', env: TMUX_ENV });
}

/** The visible screen, one string per row, trailing spaces trimmed. */
function screen(socket: string): string[] {
  return tmux(socket, ['capture-pane', '-p', '-t', 's'])
    .split('\n')
    .map((l) => l.trimEnd());
}

/** Polls the screen until `ok` holds; fails with the last screen after the bound. */
async function until(socket: string, what: string, ok: (rows: string[]) => boolean): Promise<string[]> {
  const deadline = Date.now() + BOUND_MS;
  for (;;) {
    const rows = screen(socket);
    if (ok(rows)) return rows;
    if (Date.now() > deadline) throw new Error(`screen never showed ${what}:\n${rows.join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.runIf(HAVE_TMUX)('sluice run on a terminal', () => {
  it('draws a ticking status area with complete lines only, replaced by the final display', async () => {
    const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-live-'));
    const socket = `sluice-live-${process.pid}-${Date.now()}`;
    cleanups.push(async () => {
      spawnSync('tmux', ['-L', socket, 'kill-server']);
      await fsp.rm(dir, { recursive: true, force: true });
    });
    const go = join(dir, 'GO');
    const command = `for i in $(seq 1 30); do echo "row $i"; done; printf 'partial-no-newline'; until [ -e ${go} ]; do sleep 0.05; done; echo ' end'`;
    const quote = (a: string) => `'${a.replaceAll("'", `'\\''`)}'`;
    const run = [
      process.execPath,
      MAIN,
      'run',
      'bash',
      '--args',
      JSON.stringify({ command }),
      '--store',
      join(dir, 'store'),
    ];
    // A script, so no shell between tmux and it expands anything of the command.
    const script = join(dir, 'run.sh');
    await fsp.writeFile(script, `${run.map(quote).join(' ')}\necho "[exit $?]"\nexec sleep 600\n`);
    tmux(socket, ['new-session', '-d', '-s', 's', '-x', '120', '-y', '40', `sh ${quote(script)}`]);

    // All 30 rows arrived: the status line counts them (the unfinished line is a line of the stream too),
    // and the area shows the last four complete lines, never the unfinished one.
    const live = await until(socket, 'the counts of 31 lines', (rows) => rows.some((r) => r.includes('in 31 lines')));
    const status = live.find((r) => r.includes('in 31 lines')) as string;
    expect(status).toMatch(/^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] bash · \d+(\.\d)? (ms|s) · stdout 219 B in 31 lines · stderr empty$/);
    const at = live.indexOf(status);
    expect(live.slice(at + 1, at + 5)).toEqual(['  │ row 27', '  │ row 28', '  │ row 29', '  │ row 30']);
    expect(live.join('\n')).not.toContain('partial-no-newline');
    // The tool is silent now (waiting for GO): the clock still moves.
    const elapsed = (rows: string[]) => / bash · ([^·]+) · /.exec(rows.find((r) => r.includes(' bash · ')) ?? '')?.[1];
    const first = elapsed(live);
    await until(socket, 'the elapsed time change', (rows) => {
      const now = elapsed(rows);
      return now !== undefined && now !== first;
    });

    await fsp.writeFile(go, '');
    const done = await until(socket, 'the exit line', (rows) => rows.some((r) => r === '[exit 0]'));
    const text = done.join('\n');
    // The live area is gone: no spinner, no status line, no live lines.
    expect(text).not.toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] bash/);
    expect(text).not.toContain('  │ row');
    // The final display replaced it, then the model view (stdout) follows, then the exit line.
    const final = done.findIndex((r) => /^exit code 0 · stdout/.test(r));
    const model = done.indexOf('[stdout]');
    expect(final).toBeGreaterThanOrEqual(0);
    expect(model).toBeGreaterThan(final);
    expect(done.slice(model + 1, model + 3)).toEqual(['row 1', 'row 2']);
    expect(done.indexOf('[exit 0]')).toBeGreaterThan(model);
  });

  it('draws nothing when stderr is not a terminal', async () => {
    const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-live-'));
    cleanups.push(() => fsp.rm(dir, { recursive: true, force: true }));
    const child = spawn(
      process.execPath,
      [
        MAIN,
        'run',
        'bash',
        '--args',
        JSON.stringify({ command: 'seq 1 3; sleep 0.3; echo x' }),
        '--store',
        join(dir, 'store'),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const code = await new Promise((r) => child.on('close', r));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toBe('[stdout]\n1\n2\n3\nx\n\n[stderr]\n(empty)\n');
  });
});
