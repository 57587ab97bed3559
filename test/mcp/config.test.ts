/**
 * Configuration of the adapters: MCP server options, tool-name mapping, the
 * `sluice run` config file and flags, and `sluice run` using both adapters
 * end to end (a real CLI process, a real MCP server, a plugin).
 */
import { execFile } from 'node:child_process';
import { existsSync, promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { applyConfig, loadConfigFile, loadRunConfig, parseMcpFlag, splitCommand } from '../../cli/config.js';
import { parseMcpServerConfig, sluiceToolNames } from '../../engine/mcp/config.js';
import { distPath } from '../../engine/pool/dist-paths.js';
import { cleanup, finish, MCP_SERVER, openEngine, plugin, uniqueMarker, waitNoProcess } from '../support/mcp.js';

const exec = promisify(execFile);

afterEach(cleanup);

const TOOL_NAME = /^[a-z][a-z0-9_.-]{0,63}$/;

async function tempDir(): Promise<string> {
  return fsp.mkdtemp(join(tmpdir(), 'sluice-config-'));
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
}

describe('MCP tool names', () => {
  it('are <server>.<tool>, lower-cased, other characters replaced, always valid tool names', () => {
    const names = sluiceToolNames('gh', ['list_issues', 'Get Repo', 'fetch/url', 'ünïcode', 'a.b-c']);
    expect(Object.fromEntries(names)).toEqual({
      list_issues: 'gh.list_issues',
      'Get Repo': 'gh.get_repo',
      'fetch/url': 'gh.fetch_url',
      ünïcode: 'gh._n_code',
      'a.b-c': 'gh.a.b-c',
    });
    for (const n of names.values()) expect(n).toMatch(TOOL_NAME);
  });

  it('names that collide after mapping or run past 64 characters get a stable hash suffix', () => {
    const long = 'x'.repeat(80);
    const a = sluiceToolNames('srv', ['Fetch', 'fetch', long, 'other']);
    const b = sluiceToolNames('srv', ['other', long, 'fetch', 'Fetch']);
    expect(Object.fromEntries(a)).toEqual(Object.fromEntries(b));
    expect(a.get('Fetch')).not.toBe(a.get('fetch'));
    expect(a.get('Fetch')).toMatch(/^srv\.fetch-[0-9a-f]{6}$/);
    expect(a.get(long)).toHaveLength(64);
    expect(a.get('other')).toBe('srv.other');
    for (const n of a.values()) expect(n).toMatch(TOOL_NAME);
  });
});

describe('MCP server options', () => {
  it('defaults: no args, no extra env, the engine cwd, 4 GiB messages', () => {
    expect(parseMcpServerConfig({ name: 'fs', command: 'srv' }, '/work')).toEqual({
      name: 'fs',
      command: 'srv',
      args: [],
      env: {},
      cwd: '/work',
      maxMessageBytes: 4 * 1024 * 1024 * 1024,
    });
    expect(parseMcpServerConfig({ name: 'fs', command: 'srv', cwd: 'sub' }, '/work').cwd).toBe('/work/sub');
  });

  it('bad values are EBADOPTION naming the option and quoting the value', () => {
    const bad: Array<[unknown, string]> = [
      [{ name: 'has.dot', command: 'x' }, '"has.dot"'],
      [{ name: 'ok', command: 'x', env: { A: 1 } }, 'env.A'],
      [{ name: 'ok', command: 'x', maxMessageBytes: 10 }, '10'],
      [{ name: 'ok' }, 'missing'],
      [{ name: 'ok', command: 'x', transport: 'sse' }, 'transport'],
    ];
    for (const [input, quoted] of bad) {
      try {
        parseMcpServerConfig(input, '/');
        throw new Error(`accepted ${JSON.stringify(input)}`);
      } catch (err) {
        expect((err as { code?: string }).code).toBe('EBADOPTION');
        expect((err as Error).message).toContain(quoted);
      }
    }
  });
});

describe('sluice run config', () => {
  it('a config file resolves plugin paths and server cwd against its own directory', async () => {
    const dir = await tempDir();
    try {
      const file = join(dir, 'sluice.json');
      await fsp.writeFile(
        file,
        JSON.stringify({
          mcpServers: { files: { type: 'stdio', command: 'srv', args: ['--root', '.'], cwd: 'data', env: { K: 'v' } } },
          plugins: ['./tools/a.mjs', 'file:///opt/b.mjs'],
        }),
      );
      expect(await loadConfigFile(file)).toEqual({
        plugins: [join(dir, 'tools', 'a.mjs'), 'file:///opt/b.mjs'],
        mcpServers: [{ name: 'files', command: 'srv', args: ['--root', '.'], cwd: join(dir, 'data'), env: { K: 'v' } }],
        engine: {},
      });
      // Flags come after the file, relative to the working directory.
      const merged = await loadRunConfig({ config: 'sluice.json', plugin: ['p.mjs'], mcp: ['x=srv -v'] }, dir);
      expect(merged.plugins).toEqual([join(dir, 'tools', 'a.mjs'), 'file:///opt/b.mjs', join(dir, 'p.mjs')]);
      expect(merged.mcpServers.map((s) => s.name)).toEqual(['files', 'x']);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  it('invalid files are EBADOPTION with the bad value; a missing file is ENOTFOUND', async () => {
    const dir = await tempDir();
    try {
      const cases: Array<[string, string]> = [
        ['{ not json', 'not valid JSON'],
        ['{"mcpServers": {"x": {"url": "http://localhost:1"}}}', 'mcpServers.x'],
        ['{"mcpServers": {"x": {"type": "sse", "command": "a"}}}', '"sse"'],
        ['{"mcpServers": {"Bad Name": {"command": "a"}}}', '"Bad Name"'],
        ['{"plugins": "one.mjs"}', '"one.mjs"'],
        ['{"plugin": []}', 'plugin'],
      ];
      for (const [text, quoted] of cases) {
        const file = join(dir, 'c.json');
        await fsp.writeFile(file, text);
        const err = await loadConfigFile(file).catch((e: unknown) => e);
        expect((err as { code?: string }).code, text).toBe('EBADOPTION');
        expect((err as Error).message, text).toContain(quoted);
      }
      const missing = await loadConfigFile(join(dir, 'nope.json')).catch((e: unknown) => e);
      expect((missing as { code?: string }).code).toBe('ENOTFOUND');
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  it('--mcp NAME=COMMAND splits the command like a shell, without running one', () => {
    expect(parseMcpFlag(`fs=npx -y "my server" --root '/a b' x\\ y`, '/w')).toEqual({
      name: 'fs',
      command: 'npx',
      args: ['-y', 'my server', '--root', '/a b', 'x y'],
      cwd: '/w',
    });
    expect(splitCommand(`a "b \\" c" '' d`)).toEqual(['a', 'b " c', '', 'd']);
    expect(codeOf(() => parseMcpFlag('noequals', '/'))).toBe('EBADOPTION');
    expect(codeOf(() => parseMcpFlag('x=', '/'))).toBe('EBADOPTION');
    expect(codeOf(() => parseMcpFlag('X=cmd', '/'))).toBe('EBADOPTION');
    expect(codeOf(() => parseMcpFlag(`x=cmd "open`, '/'))).toBe('EBADOPTION');
  });

  it('applyConfig registers plugins and MCP servers on an engine', async () => {
    const env = await openEngine();
    const tools = await applyConfig(env.engine, {
      plugins: [plugin('results-diagnostics')],
      mcpServers: [{ name: 'fx', command: process.execPath, args: [MCP_SERVER, env.marker] }],
    });
    expect(tools[0]?.name).toBe('plugin.search');
    expect(tools.filter((t) => t.source === 'mcp').map((t) => t.name)).toContain('fx.echo');
    expect((await env.engine.run('fx.echo', { text: 'configured' })).model).toBe('configured');
    await finish(env);
  });
});

describe('sluice run with adapters', () => {
  it('runs an MCP tool from --config and a plugin from --plugin; the server does not outlive the command', async () => {
    const dir = await tempDir();
    const marker = uniqueMarker();
    try {
      const cli = distPath('cli/main.js');
      await fsp.writeFile(
        join(dir, 'sluice.json'),
        JSON.stringify({ mcpServers: { fx: { command: process.execPath, args: [MCP_SERVER, marker] } } }),
      );
      const base = ['--store', join(dir, 'store'), '--config', 'sluice.json'];
      const mcp = await exec(process.execPath, [cli, 'run', 'fx.shout', '--args', '{"text":"loud"}', ...base], {
        cwd: dir,
      });
      expect(mcp.stdout).toBe('LOUD\n');
      const json = await exec(
        process.execPath,
        [
          cli,
          'run',
          'plugin.search',
          '--args',
          '{"items":2}',
          '--plugin',
          plugin('results-diagnostics'),
          '--json',
          ...base,
        ],
        { cwd: dir },
      );
      const result = JSON.parse(json.stdout);
      expect(result.status).toBe('success');
      expect(result.output.streams.map((s: { name: string }) => s.name)).toEqual(['results', 'diagnostics']);
      // A failing MCP tool exits 1 with its model view on stdout.
      const failed = await exec(process.execPath, [cli, 'run', 'fx.fail', ...base], { cwd: dir }).catch(
        (e: { code: number; stdout: string }) => e,
      );
      expect((failed as { code: number }).code).toBe(1);
      expect((failed as { stdout: string }).stdout, (failed as { stderr: string }).stderr).toContain(
        'disk quota exceeded',
      );
      expect(await waitNoProcess(marker)).toEqual([]);
      expect(await fsp.readdir(join(dir, 'store', 'tmp'))).toEqual([]);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  it('a bad --mcp flag exits 2 with EBADOPTION before anything starts', async () => {
    const dir = await tempDir();
    try {
      const cli = distPath('cli/main.js');
      const r = await exec(process.execPath, [cli, 'run', 'x.y', '--store', join(dir, 'store'), '--mcp', 'Bad=cmd'], {
        cwd: dir,
      }).catch((e: { code: number; stderr: string }) => e);
      expect((r as { code: number }).code).toBe(2);
      expect((r as { stderr: string }).stderr).toMatch(/^EBADOPTION: --mcp/);
      // Refused before the engine opened: no store was created.
      expect(existsSync(join(dir, 'store'))).toBe(false);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
