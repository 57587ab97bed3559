/**
 * Authentication: every request needs the bearer token; without it (or with
 * a wrong one) the answer is 401 and nothing else, whatever the route. The
 * token is created on first start with mode 0600 and printed only then.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../../engine/protocol/messages.js';
import { bearerMatches, loadOrCreateToken, TOKEN_FILE } from '../../server/auth.js';
import { cleanup, printedToken, spawnServe, startTestServer, tempDir } from './helpers.js';

afterEach(cleanup);

const ROUTES: Array<[string, string]> = [
  ['GET', '/v1/info'],
  ['GET', '/v1/tools'],
  ['POST', '/v1/calls'],
  ['GET', '/v1/calls/00000000-0000-0000-0000-000000000000'],
  ['GET', '/v1/calls/00000000-0000-0000-0000-000000000000/events'],
  ['POST', '/v1/calls/00000000-0000-0000-0000-000000000000/cancel'],
  ['GET', '/v1/read?filePath=artifact://x'],
  ['GET', '/v1/sessions'],
  ['GET', '/v1/sessions/s1/replay'],
  ['GET', '/no/such/route'],
];

describe('bearer token', () => {
  it('a missing, wrong or malformed token gets 401 with no body and no details, on every route', async () => {
    const s = await startTestServer();
    const wrong = `${s.token.slice(0, -1)}${s.token.endsWith('0') ? '1' : '0'}`;
    const variants: Array<Record<string, string>> = [
      {},
      { authorization: `Bearer ${wrong}` },
      { authorization: `Bearer ${s.token.slice(0, 32)}` },
      { authorization: `Basic ${Buffer.from(`x:${s.token}`).toString('base64')}` },
      { authorization: s.token },
      { authorization: `Bearer ${s.token} extra` },
    ];
    for (const [method, path] of ROUTES) {
      for (const headers of variants) {
        const res = await fetch(`${s.url}${path}`, {
          method,
          headers: { ...headers, ...(method === 'POST' ? { 'content-type': 'application/json' } : {}) },
          ...(method === 'POST' ? { body: JSON.stringify({ tool: 'bash', args: { command: 'echo hi' } }) } : {}),
        });
        expect([method, path, res.status]).toEqual([method, path, 401]);
        expect(await res.text()).toBe('');
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
        expect(res.headers.get('sluice-protocol')).toBeNull();
        expect(res.headers.get('content-type')).toBeNull();
      }
    }
    // Nothing was started by any of those requests.
    expect(await s.engine.sessions()).toEqual([]);
  });

  it('the right token is accepted (case-insensitive scheme)', async () => {
    const s = await startTestServer();
    for (const scheme of ['Bearer', 'bearer']) {
      const res = await fetch(`${s.url}/v1/info`, { headers: { authorization: `${scheme} ${s.token}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('sluice-protocol')).toBe(String(PROTOCOL_VERSION));
      expect(await res.json()).toMatchObject({ name: 'sluice', protocolVersion: PROTOCOL_VERSION });
    }
  });

  it('bearerMatches compares whole tokens only', () => {
    const t = 'a'.repeat(64);
    expect(bearerMatches(`Bearer ${t}`, t)).toBe(true);
    expect(bearerMatches(`Bearer ${t}a`, t)).toBe(false);
    expect(bearerMatches(`Bearer ${t.slice(1)}`, t)).toBe(false);
    expect(bearerMatches('Bearer ', t)).toBe(false);
    expect(bearerMatches(undefined, t)).toBe(false);
  });
});

describe('token file', () => {
  it('is created once with mode 0600 and 32 random bytes, then reused', async () => {
    const dir = await tempDir();
    const first = await loadOrCreateToken(dir);
    expect(first.created).toBe(true);
    expect(first.token).toMatch(/^[0-9a-f]{64}$/);
    expect(first.path).toBe(join(dir, TOKEN_FILE));
    expect((await fsp.stat(first.path)).mode & 0o777).toBe(0o600);
    const again = await loadOrCreateToken(dir);
    expect(again).toEqual({ ...first, created: false });
    // No temporary file was left beside it.
    expect(await fsp.readdir(dir)).toEqual([TOKEN_FILE]);
    // Another store gets another token.
    expect((await loadOrCreateToken(await tempDir())).token).not.toBe(first.token);
  });

  it('concurrent first starts agree on one token', async () => {
    const dir = await tempDir();
    const all = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateToken(dir)));
    expect(new Set(all.map((t) => t.token)).size).toBe(1);
    expect(all.filter((t) => t.created)).toHaveLength(1);
    expect(await fsp.readdir(dir)).toEqual([TOKEN_FILE]);
  });

  it('a token file others can read, a malformed one or a symlink is refused (EBADOPTION), never replaced', async () => {
    const dir = await tempDir();
    const { path } = await loadOrCreateToken(dir);
    await fsp.chmod(path, 0o644);
    await expect(loadOrCreateToken(dir)).rejects.toMatchObject({ code: 'EBADOPTION' });
    await fsp.writeFile(path, 'not a token\n', { mode: 0o600 });
    await fsp.chmod(path, 0o600);
    await expect(loadOrCreateToken(dir)).rejects.toMatchObject({ code: 'EBADOPTION' });
    expect(await fsp.readFile(path, 'utf8')).toBe('not a token\n');
    await fsp.rm(path);
    const other = join(await tempDir(), 'elsewhere');
    await fsp.writeFile(other, `${'b'.repeat(64)}\n`, { mode: 0o600 });
    await fsp.symlink(other, path);
    await expect(loadOrCreateToken(dir)).rejects.toMatchObject({ code: 'EBADOPTION' });
  });

  it('sluice serve prints the token on first start only, and later starts accept the same token', async () => {
    const dir = await tempDir();
    const store = join(dir, 'store');
    const first = await spawnServe(['--store', store]);
    const token = printedToken(first.stdout());
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect((await fsp.stat(join(store, TOKEN_FILE))).mode & 0o777).toBe(0o600);
    expect((await fsp.readFile(join(store, TOKEN_FILE), 'utf8')).trim()).toBe(token);
    expect((await fetch(`${first.url}/v1/info`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(143);

    const second = await spawnServe(['--store', store]);
    expect(second.stdout()).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(second.stdout()).not.toContain(token);
    expect(printedToken(second.stdout())).toBeUndefined();
    expect((await fetch(`${second.url}/v1/info`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect((await fetch(`${second.url}/v1/info`)).status).toBe(401);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(143);
    expect(second.stderr()).not.toContain(token);
  });
});
