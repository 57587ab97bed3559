/**
 * What a consumer gets: the packed tarball installed into a fresh project
 * (offline, from the npm cache `npm ci` filled; see pack.ts). The count of
 * packages it brings is kept here: a new runtime dependency changes it, and
 * must be argued for (docs/architecture.md, "Dependencies"). Then the
 * installed package is used the ways a consumer would: import, require,
 * require without require(esm), the CLI, `sluice/schema`, and MCP without
 * the optional SDK.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedPackages, npm, PACKAGE, packInto, writeConsumer } from './pack.js';

const run = promisify(execFile);

/**
 * Every package a consumer installs with sluice. piscina, comlink, zod and
 * xxhash-wasm are sluice's own; @napi-rs/nice (and its one binary for this
 * platform) is piscina's optional dependency for thread priorities.
 */
const CONSUMER_TREE = [
  '@napi-rs/nice',
  '@napi-rs/nice-<platform>',
  'comlink',
  'piscina',
  're2js',
  'sluice',
  'xxhash-wasm',
  'zod',
];

/** Runs node in the consumer project. */
function node(cwd: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, args, { cwd, env: { ...process.env, SLUICE_STORE: join(cwd, 'store') } });
}

describe('installing the packed tarball into a new project', () => {
  let dir: string;
  let app: string;
  let installLog: string;

  beforeAll(async () => {
    dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-install-'));
    app = join(dir, 'app');
    await fsp.mkdir(app);
    const tarball = await packInto(dir);
    await writeConsumer(app, tarball);
    try {
      const out = await npm(['ci', '--offline', '--no-audit', '--no-fund'], app);
      installLog = `${out.stdout}\n${out.stderr}`;
    } catch (err) {
      throw new Error(
        `npm ci --offline of the consumer failed (the npm cache must hold sluice's dependencies: run npm ci in the checkout first): ${(err as Error).message}`,
      );
    }
  }, 120_000);

  afterAll(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
    await expect(fsp.stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('installs sluice and its five runtime dependencies only: no MCP SDK, no web framework', async () => {
    // The one prebuilt binary npm picks for this machine has the platform in its name.
    const tree = (await installedPackages(app)).map((p) =>
      p.replace(/^@napi-rs\/nice-.+$/, '@napi-rs/nice-<platform>'),
    );
    expect(tree).toEqual(CONSUMER_TREE);
    expect(Object.keys(PACKAGE.dependencies).sort()).toEqual(['comlink', 'piscina', 're2js', 'xxhash-wasm', 'zod']);
  });

  it('prints no install-script warning', () => {
    expect(installLog).not.toMatch(/install-scripts|prepare/);
  });

  it('works through import and require, which share one module instance', async () => {
    const script = [
      "const viaRequire = require('sluice');",
      "import('sluice').then((m) => {",
      '  console.log(typeof m.Engine, m.Engine === viaRequire.Engine, m.PROTOCOL_VERSION === viaRequire.PROTOCOL_VERSION);',
      '});',
    ].join('\n');
    const { stdout } = await node(app, ['-e', script]);
    expect(stdout).toBe('function true true\n');
  });

  it('without require(esm), require fails with EUNSUPPORTED naming the Node.js version needed', async () => {
    const script =
      "try { require('sluice'); console.log('loaded'); } catch (e) { console.log(e.code + ' ' + e.message); }";
    const { stdout } = await node(app, ['--no-experimental-require-module', '-e', script]);
    expect(stdout).toMatch(
      /^EUNSUPPORTED require\('sluice'\) needs require\(esm\), on by default from Node\.js 20\.19/,
    );
  });

  it('exports the JSON Schema as sluice/schema', async () => {
    const script =
      "const p = require.resolve('sluice/schema'); const s = require(p); console.log(p.endsWith('docs/schema/sluice-protocol.json'), s['x-sluice-protocol-version'])";
    const { stdout } = await node(app, ['-e', script]);
    expect(stdout).toBe(`true ${(await import('../../engine/protocol/messages.js')).PROTOCOL_VERSION}\n`);
  });

  it('runs a real call, and adding an MCP server says how to install the SDK (EMISSINGDEP)', async () => {
    const script = `
      import { Engine } from 'sluice';
      const engine = await Engine.open();
      const r = await engine.call('bash', { command: 'printf installed' }).result;
      let code = 'none', install = '';
      try { await engine.addMcpServer({ name: 'files', command: 'true' }); }
      catch (e) { code = e.code; install = e.details.install; }
      await engine.close();
      console.log(JSON.stringify({ status: r.status, bytes: r.output.streams[0].bytes, code, install }));
    `;
    await fsp.writeFile(join(app, 'use.mjs'), script);
    const { stdout } = await node(app, ['use.mjs']);
    expect(JSON.parse(stdout)).toEqual({
      status: 'success',
      bytes: 9,
      code: 'EMISSINGDEP',
      install: "npm install @modelcontextprotocol/sdk@'^1.32.2'",
    });
  });

  it('sluice mcp without the SDK exits 1 with EMISSINGDEP and its install command, writing nothing on stdout', async () => {
    const failed = await run(join(app, 'node_modules', '.bin', 'sluice'), ['mcp'], { cwd: app }).catch(
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
    expect(failed).toMatchObject({ code: 1, stdout: '' });
    expect((failed as { stderr: string }).stderr).toMatch(
      /^EMISSINGDEP: .*sluice mcp.*npm install @modelcontextprotocol\/sdk@'\^1\.32\.2'\n$/,
    );
  });

  it('the sluice command runs from the install and prints the package version', async () => {
    const { stdout } = await run(join(app, 'node_modules', '.bin', 'sluice'), ['--version'], { cwd: app });
    expect(stdout).toBe(`${PACKAGE.version}\n`);
  });
});
