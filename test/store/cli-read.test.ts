import { existsSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { encodeManifest } from '../../store/manifest.js';
import { Store } from '../../store/store.js';
import { CLI, flipBit, sha256, sluice, tempDir } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const CONTENT = 'zero\r\none 😀\ntwo é\nthree';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});

async function storeWith(content: string | Buffer): Promise<{ dir: string; store: Store; digest: string }> {
  const dir = join(await tempDir(), 'store');
  const store = await Store.open(dir);
  const { digest } = await store.publishBytes(content);
  return { dir, store, digest };
}

describe('sluice read', () => {
  it('writes invalid UTF-8 exactly as stored when piped and with --raw; --json says lossy and shows U+FFFD', async () => {
    const stored = Buffer.from([0x61, 0xff, 0x0a, 0x62, 0xe2, 0x82]);
    const { dir, digest } = await storeWith(stored);
    const piped = await sluice(['read', `artifact://${digest}`, '--store', dir]);
    expect(piped.code).toBe(0);
    expect(piped.stdout).toEqual(stored);
    const raw = await sluice(['read', `artifact://${digest}`, '--raw', '--offset', '1', '--store', dir]);
    expect(raw.stdout).toEqual(stored.subarray(3));
    const json = await sluice(['read', `artifact://${digest}`, '--json', '--store', dir]);
    expect(JSON.parse(json.stdout.toString('utf8'))).toEqual({
      content: 'a\uFFFD\nb\uFFFD',
      offset: 0,
      lines: 2,
      totalLines: 2,
      nextOffset: null,
      nextByteOffset: null,
      lossy: true,
    });
    const both = await sluice(['read', `artifact://${digest}`, '--raw', '--json', '--store', dir]);
    expect(both.code).toBe(2);
    expect(both.stderr.toString()).toMatch(/^EBADARGS: /);
  });

  it('prints the page exactly as stored: no line numbers, no added newline', async () => {
    const { dir, digest } = await storeWith(CONTENT);
    const all = await sluice(['read', `artifact://${digest}`, '--store', dir]);
    expect(all).toMatchObject({ code: 0, stderr: '' });
    expect(all.stdout.equals(Buffer.from(CONTENT))).toBe(true);
    const page = await sluice(['read', `artifact://${digest}`, '--offset', '1', '--limit', '2', '--store', dir]);
    expect(page.code).toBe(0);
    expect(page.stdout.toString('utf8')).toBe('one 😀\ntwo é\n');
  });

  it('prints { content, offset, lines, totalLines, nextOffset } with --json', async () => {
    const { dir, digest } = await storeWith(CONTENT);
    const first = await sluice(['read', `artifact://${digest}`, '--limit', '1', '--json', '--store', dir]);
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout.toString('utf8'))).toEqual({
      content: 'zero\r\n',
      offset: 0,
      lines: 1,
      totalLines: 4,
      nextOffset: 1,
      nextByteOffset: null,
      lossy: false,
    });
    const last = await sluice(['read', `artifact://${digest}`, '--offset=3', '--json', '--store', dir]);
    expect(JSON.parse(last.stdout.toString('utf8'))).toEqual({
      content: 'three',
      offset: 3,
      lines: 1,
      totalLines: 4,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
  });

  it('reads a named stream through its manifest', async () => {
    const { dir, store } = await storeWith('');
    const out = await store.publishBytes('from stdout\n');
    const m = await store.publishBytes(
      encodeManifest([{ name: 'stdout', digest: out.digest, bytes: out.bytes, lines: out.lines }]),
    );
    const r = await sluice(['read', `artifact://${m.digest}/stdout`, '--store', dir]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout.toString('utf8')).toBe('from stdout\n');
    const unknown = await sluice(['read', `artifact://${m.digest}/stderr`, '--store', dir]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^EUNKNOWNSTREAM: /);
  });

  it('chooses the store by --store, else $SLUICE_STORE, else ./.sluice', async () => {
    const cwd = await tempDir();
    const inCwd = await Store.open(join(cwd, '.sluice'));
    const viaEnv = await Store.open(join(cwd, 'env-store'));
    const viaFlag = await Store.open(join(cwd, 'flag-store'));
    const d = (await inCwd.publishBytes('default\n')).digest;
    const e = (await viaEnv.publishBytes('env\n')).digest;
    const f = (await viaFlag.publishBytes('flag\n')).digest;
    const env = { SLUICE_STORE: join(cwd, 'env-store') };
    expect((await sluice(['read', `artifact://${d}`], { cwd })).stdout.toString()).toBe('default\n');
    expect((await sluice(['read', `artifact://${e}`], { cwd, env })).stdout.toString()).toBe('env\n');
    expect((await sluice(['read', `artifact://${d}`], { cwd, env })).code).toBe(1);
    expect((await sluice(['read', `artifact://${f}`, '--store', 'flag-store'], { cwd, env })).stdout.toString()).toBe(
      'flag\n',
    );
    // An empty $SLUICE_STORE is unset, not "the working directory".
    expect((await sluice(['read', `artifact://${d}`], { cwd, env: { SLUICE_STORE: '' } })).stdout.toString()).toBe(
      'default\n',
    );
  });

  it.each([
    ['a malformed artifact URI', ['read', 'artifact://abc'], 'EBADURI'],
    ['an uppercase scheme', ['read', `ARTIFACT://${sha256('x')}`], 'EBADURI'],
    ['no filePath', ['read'], 'EBADARGS'],
    ['two filePaths', ['read', `artifact://${sha256('x')}`, 'x'], 'EBADARGS'],
    ['a non-numeric offset', ['read', `artifact://${sha256('x')}`, '--offset', 'ten'], 'EBADARGS'],
    ['a negative offset', ['read', `artifact://${sha256('x')}`, '--offset=-1'], 'EBADARGS'],
    ['a zero limit', ['read', `artifact://${sha256('x')}`, '--limit', '0'], 'EBADARGS'],
    ['a limit over 2000', ['read', `artifact://${sha256('x')}`, '--limit', '2001'], 'EBADARGS'],
    ['an unknown option', ['read', `artifact://${sha256('x')}`, '--bogus'], 'EBADOPTION'],
    ['an option without its value', ['read', `artifact://${sha256('x')}`, '--limit'], 'EBADOPTION'],
    ['an unknown command', ['frobnicate'], 'EBADARGS'],
  ])('rejects %s: CODE: message on stderr, exit 2', async (_label, args, code) => {
    const { dir } = await storeWith('x');
    const r = await sluice([...args, '--store', dir]);
    expect({ code: r.code, stderr: r.stderr }).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(`^${code}: \\S`),
    });
    expect(r.stdout.length).toBe(0);
  });

  it('fails with ENOTFOUND (exit 1) for a missing blob and EINTEGRITY (exit 1) for a corrupt one', async () => {
    const { dir, store, digest } = await storeWith('precious\n');
    const missing = await sluice(['read', `artifact://${sha256('nope')}`, '--store', dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^ENOTFOUND: /);
    await flipBit(store.layout.blobPath(digest), 0);
    const corrupt = await sluice(['read', `artifact://${digest}`, '--store', dir]);
    expect(corrupt.code).toBe(1);
    expect(corrupt.stdout.length).toBe(0);
    expect(corrupt.stderr).toMatch(/^EINTEGRITY: /);
  });

  it('fails with ENOTFOUND when the store does not exist, without creating it', async () => {
    const dir = join(await tempDir(), 'absent');
    const r = await sluice(['read', `artifact://${sha256('x')}`, '--store', dir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^ENOTFOUND: no sluice store at /);
    await expect(fsp.stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('fails with ERESOURCELIMIT (exit 1) for whole lines over 2 MiB and prints nothing on stdout', async () => {
    const line = `${'y'.repeat(1024 * 1024)}\n`;
    const { dir, digest } = await storeWith(`${line}${line}${line}`);
    const r = await sluice(['read', `artifact://${digest}`, '--store', dir]);
    expect(r.code).toBe(1);
    expect(r.stdout.length).toBe(0);
    expect(r.stderr).toMatch(/^ERESOURCELIMIT: .*read with limit=1/);
  });

  it('prints a line over 2 MiB in parts, saying on stderr how to go on, and --byte-offset continues it', async () => {
    const { dir, digest } = await storeWith(`${'y'.repeat(3 * 1024 * 1024)}\n`);
    const first = await sluice(['read', `artifact://${digest}`, '--limit', '1', '--store', dir]);
    expect(first.code).toBe(0);
    expect(first.stdout.length).toBe(2 * 1024 * 1024);
    expect(first.stderr).toContain('--offset 0 --byte-offset 2097152');
    const rest = await sluice(['read', `artifact://${digest}`, '--byte-offset', '2097152', '--json', '--store', dir]);
    expect(rest.code).toBe(0);
    expect(JSON.parse(rest.stdout.toString())).toMatchObject({
      lines: 1,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    expect(JSON.parse(rest.stdout.toString()).content.length).toBe(1024 * 1024 + 1);
  });

  it('prints a full 2 MiB page through a pipe without losing the end', async () => {
    const line = `${'z'.repeat(1023)}\n`;
    const content = line.repeat(2048);
    const { dir, digest } = await storeWith(content);
    const r = await sluice(['read', `artifact://${digest}`, '--limit', '2000', '--store', dir]);
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBe(2000 * 1024);
  });

  it('prints help with exit 0, and usage with exit 2 when no command is given', async () => {
    const help = await sluice(['read', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout.toString()).toMatch(/^Usage: sluice read <filePath>/);
    const top = await sluice(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout.toString()).toContain('read');
    expect(top.stdout.toString()).toContain('verify');
    const none = await sluice([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^Usage: sluice <command>/);
  });
});
