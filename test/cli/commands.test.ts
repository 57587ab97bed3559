/**
 * The CLI as its users meet it, as real processes: mistakes get a
 * suggestion and exit 2, `sluice tools`, `sluice sessions`, `sluice revert`,
 * `sluice help <command>`, and the limits set by flags and by --config.
 * Every test runs in its own mkdtemp directory, removed afterwards.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BUILTIN_TOOLS } from '../../engine/builtins/descriptions.js';
import { minModelBytes } from '../../engine/presentation/options.js';
import { cleanupDirs, sluice, tempDir } from './helpers.js';

afterEach(cleanupDirs);

/** Runs `seq 1 10` in session `session` of the store under `dir`; resolves to the call id. */
async function recordCall(dir: string, session: string, command = 'seq 1 10'): Promise<string> {
  const r = await sluice(['run', 'bash', '--args', JSON.stringify({ command }), '--session', session, '--json'], dir);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { callId: string }).callId;
}

describe('usage mistakes', () => {
  it('an unknown option, command or tool names the closest one and exits 2', async () => {
    const dir = await tempDir();
    const option = await sluice(['run', 'bash', '--sesion', 'x'], dir);
    expect(option).toMatchObject({ code: 2, stdout: '' });
    expect(option.stderr).toBe(
      'EBADOPTION: unknown option --sesion; did you mean --session? (see sluice run --help)\n',
    );
    const cmd = await sluice(['rnu'], dir);
    expect(cmd.code).toBe(2);
    expect(cmd.stderr).toMatch(
      /^EBADARGS: unknown command "rnu"; did you mean "run"\? \(commands: run, batch, read, grep, /,
    );
    const tool = await sluice(['run', 'bsh'], dir);
    expect(tool.code).toBe(2);
    expect(tool.stderr).toBe(
      'EUNKNOWNTOOL: no tool named "bsh"; did you mean "bash"? (registered: bash, read, grep)\n',
    );
  });

  it('--offset -1 says what is wrong with the value', async () => {
    const dir = await tempDir();
    const r = await sluice(['read', 'x.txt', '--offset', '-1'], dir);
    expect(r).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'EBADARGS: --offset must be a non-negative integer, got "-1"\n',
    });
  });

  it('a single-value option given twice is refused, not silently last-wins', async () => {
    const dir = await tempDir();
    const r = await sluice(['run', 'bash', '--args', '{"command":"true"}', '--session', 'a', '--session', 'b'], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'EBADOPTION: --session was given twice ("a" and "b"); it takes one value (see sluice run --help)\n',
    );
    // Nothing ran: no store was created.
    await expect(fsp.stat(join(dir, 'store'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it("sluice help <command> prints that command's usage; an unknown one is suggested", async () => {
    const dir = await tempDir();
    const help = await sluice(['help', 'sessions'], dir);
    const flag = await sluice(['sessions', '--help'], dir);
    expect(help).toMatchObject({ code: 0 });
    expect(help.stdout).toBe(flag.stdout);
    expect(help.stdout.startsWith('Usage: sluice sessions')).toBe(true);
    const bad = await sluice(['help', 'sesions'], dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('did you mean "sessions"?');
  });
});

describe('sluice tools', () => {
  it('lists the built-ins with descriptions and arguments, creating no store', async () => {
    const dir = await tempDir();
    const r = await sluice(['tools'], dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      `bash (builtin)\n  ${BUILTIN_TOOLS.bash.description}\n  args:\n    command  string, required`,
    );
    expect(r.stdout).toContain('\nread (builtin)\n');
    await expect(fsp.stat(join(dir, 'store'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('--json gives the argument schemas (GET /v1/tools); -q the names only', async () => {
    const dir = await tempDir();
    const json = await sluice(['tools', '--json'], dir);
    const body = JSON.parse(json.stdout) as { tools: Array<{ name: string; argsSchema: unknown; source: string }> };
    expect(body.tools.map((t) => t.name)).toEqual(['bash', 'read', 'grep']);
    expect(body.tools[0]).toMatchObject({ source: 'builtin', argsSchema: BUILTIN_TOOLS.bash.argsSchema });
    const quiet = await sluice(['tools', '-q'], dir);
    expect(quiet).toMatchObject({ code: 0, stdout: 'bash\nread\ngrep\n' });
    const both = await sluice(['tools', '-q', '--json'], dir);
    expect(both.code).toBe(2);
  });
});

describe('sluice sessions and sluice revert', () => {
  it('sessions lists id, calls, referenced bytes and last activity; --json and -q agree', async () => {
    const dir = await tempDir();
    await recordCall(dir, 'alpha');
    await recordCall(dir, 'alpha', 'printf abc');
    await recordCall(dir, 'beta', 'true');
    const json = await sluice(['sessions', '--json'], dir);
    const { sessions } = JSON.parse(json.stdout) as {
      sessions: Array<{ id: string; calls: number; referencedBytes: number; updatedAt: string; bytes: number }>;
    };
    // seq 1 10 is 21 bytes, printf abc 3; beta's call wrote nothing.
    expect(sessions.map((s) => [s.id, s.calls, s.referencedBytes])).toEqual([
      ['alpha', 2, 24],
      ['beta', 1, 0],
    ]);
    const text = await sluice(['sessions'], dir);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^SESSION +CALLS +REVERTED +INTERRUPTED +REFERENCED +LOG +LAST ACTIVITY$/);
    expect(lines[1]).toMatch(new RegExp(`^alpha +2 +0 +0 +24 B +[0-9.]+ (B|KiB) +${sessions[0]?.updatedAt}$`));
    expect(lines).toHaveLength(3);
    expect((await sluice(['sessions', '-q'], dir)).stdout).toBe('alpha\nbeta\n');
  });

  it('revert hides the call and later ones; reverting again is ENOTFOUND (exit 1); bad usage exit 2', async () => {
    const dir = await tempDir();
    const first = await recordCall(dir, 's1');
    const second = await recordCall(dir, 's1', 'printf abc');
    const r = await sluice(['revert', 's1', first, '--json'], dir);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ session: 's1', reverted: [first, second] });
    const listed = JSON.parse((await sluice(['sessions', '--json'], dir)).stdout) as {
      sessions: Array<{ calls: number; reverted: number; referencedBytes: number }>;
    };
    expect(listed.sessions[0]).toMatchObject({ calls: 0, reverted: 2, referencedBytes: 0 });
    const again = await sluice(['revert', 's1', first], dir);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^ENOTFOUND: /);
    expect((await sluice(['revert', 's1'], dir)).code).toBe(2);
    const text = await recordCall(dir, 's2');
    expect((await sluice(['revert', 's2', text], dir)).stdout).toBe(`reverted 1 call of s2: ${text}\n`);
  });

  it('sessions and revert on a store that does not exist are ENOTFOUND and create nothing', async () => {
    const dir = await tempDir();
    for (const args of [['sessions'], ['revert', 'a', 'b']]) {
      const r = await sluice(args, dir);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^ENOTFOUND: no sluice store at /);
    }
    await expect(fsp.stat(join(dir, 'store'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('limits by flags and in --config', () => {
  // Head previews: bash's own head+tail would show the last lines too.
  const seq = ['run', 'bash', '--args', JSON.stringify({ command: 'seq 1 50' }), '--preview', 'head'];

  it('--max-lines and --max-bytes bound each preview; --concurrency is checked by the engine', async () => {
    const dir = await tempDir();
    const lines = await sluice([...seq, '--max-lines', '3'], dir);
    expect(lines.code, lines.stderr).toBe(0);
    expect(lines.stdout.startsWith('[stdout]\n1\n2\n3\n[Truncated:')).toBe(true);
    const bytes = await sluice([...seq, '--max-bytes', '4'], dir);
    expect(bytes.stdout.startsWith('[stdout]\n1\n2\n[Truncated:')).toBe(true);
    const zero = await sluice([...seq, '--concurrency', '0'], dir);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/^EBADOPTION: option concurrency: /);
    const word = await sluice([...seq, '--max-lines', 'many'], dir);
    expect(word).toMatchObject({
      code: 2,
      stderr: 'EBADARGS: --max-lines must be a non-negative integer, got "many"\n',
    });
  });

  it('toolOutput.maxLines, maxBytes and concurrency come from the config file; flags override it', async () => {
    const dir = await tempDir();
    const config = join(dir, 'sluice.json');
    await fsp.writeFile(config, JSON.stringify({ toolOutput: { maxLines: 2, maxBytes: 1000 }, concurrency: 2 }));
    const fromFile = await sluice([...seq, '--config', config], dir);
    expect(fromFile.code, fromFile.stderr).toBe(0);
    expect(fromFile.stdout.startsWith('[stdout]\n1\n2\n[Truncated:')).toBe(true);
    const overridden = await sluice([...seq, '--config', config, '--max-lines', '4'], dir);
    expect(overridden.stdout.startsWith('[stdout]\n1\n2\n3\n4\n[Truncated:')).toBe(true);
  });

  it('a bad limit in the config file is EBADOPTION naming the key, before anything runs', async () => {
    const dir = await tempDir();
    const config = join(dir, 'sluice.json');
    for (const [body, key] of [
      [{ toolOutput: { maxLines: 0 } }, 'toolOutput.maxLines'],
      [{ toolOutput: { maxLine: 5 } }, 'toolOutput'],
      [{ concurrency: 'many' }, 'concurrency'],
    ] as const) {
      await fsp.writeFile(config, JSON.stringify(body));
      const r = await sluice([...seq, '--config', config], dir);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^EBADOPTION: config file .*: ${key.replace('.', '\\.')}`));
    }
    await expect(fsp.stat(join(dir, 'store'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('toolOutput.maxModelBytes has one minimum: the config file names it, and that value runs', async () => {
    const dir = await tempDir();
    const config = join(dir, 'sluice.json');
    await fsp.writeFile(config, JSON.stringify({ toolOutput: { maxModelBytes: 1000 } }));
    const small = await sluice([...seq, '--config', config], dir);
    expect(small.code).toBe(2);
    const least = Number(/must be at least (\d+) with maxLines 2000/.exec(small.stderr)?.[1]);
    expect(least).toBe(minModelBytes(2000));
    await fsp.writeFile(config, JSON.stringify({ toolOutput: { maxModelBytes: least } }));
    const fits = await sluice([...seq, '--config', config], dir);
    expect(fits.code, fits.stderr).toBe(0);
    expect(fits.stdout.startsWith('[stdout]\n1\n2\n')).toBe(true);
  });
});
