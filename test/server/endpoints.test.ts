/**
 * Each endpoint against a real server on loopback, with every response body
 * checked against its wire schema: info, tools, start a call, its result
 * (202 while running, 200 once ended, 404 unknown), reads (pages and each
 * error code's status), sessions and replay, and unknown routes and methods.
 */
import { promises as fsp } from 'node:fs';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../../engine/protocol/messages.js';
import {
  callPendingSchema,
  errorBodySchema,
  infoResponseSchema,
  readPageSchema,
  replayedSessionSchema,
  sessionsResponseSchema,
  terminalResultSchema,
  toolsResponseSchema,
} from '../../engine/wire/schemas.js';
import { cleanup, startTestServer, type TestServer } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

afterEach(cleanup);

const ABSENT = 'f'.repeat(64);

async function json(res: Response): Promise<unknown> {
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  return res.json();
}

/** Expects an error response with `status` and `code`, validated by the error-body schema. */
async function expectError(res: Response, status: number, code: string): Promise<string> {
  const body = errorBodySchema.parse(await json(res));
  expect([res.status, body.error.code]).toEqual([status, code]);
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error.message;
}

async function result(s: TestServer, id: string) {
  const res = await s.api(`/v1/calls/${id}?wait=30`);
  expect(res.status).toBe(200);
  return terminalResultSchema.parse(await json(res));
}

describe('endpoints', () => {
  it('GET /v1/info and /v1/tools describe the server and its tools', async () => {
    const s = await startTestServer(['script-streams']);
    const info = infoResponseSchema.parse(await json(await s.api('/v1/info')));
    expect(info.protocolVersion).toBe(PROTOCOL_VERSION);
    expect(info.version).toMatch(/^\d+\.\d+\.\d+/);
    const res = await s.api('/v1/tools');
    expect(res.status).toBe(200);
    const { tools } = toolsResponseSchema.parse(await json(res));
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(Object.keys(byName).sort()).toEqual(['bash', 'grep', 'read', 'script-streams']);
    expect(byName.bash).toMatchObject({
      source: 'builtin',
      output: { kind: 'streams', streams: ['stdout', 'stderr'] },
    });
    expect(byName.read).toMatchObject({ source: 'builtin', selfPaginating: true, output: { kind: 'single' } });
    expect(byName['script-streams']).toMatchObject({ source: 'plugin', selfPaginating: false });
    // The server's module paths are not part of the API.
    expect(JSON.stringify(tools)).not.toContain('.mjs');
  });

  it('POST /v1/calls is 202 with the call id; GET /v1/calls/:id is 202 while running, then 200 with the result', async () => {
    const s = await startTestServer(['cooperative']);
    const res = await s.api('/v1/calls', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'cooperative', args: { onAbort: 'return' }, session: 'http-1' }),
    });
    expect(res.status).toBe(202);
    const { callId } = (await json(res)) as { callId: string };
    expect(res.headers.get('location')).toBe(`/v1/calls/${callId}`);
    const pending = await s.api(`/v1/calls/${callId}`);
    expect(pending.status).toBe(202);
    const p = callPendingSchema.parse(await json(pending));
    expect(p).toMatchObject({ callId, tool: 'cooperative', session: 'http-1', status: 'running' });
    // A bounded wait on a running call answers 202 when it runs out.
    const t0 = Date.now();
    expect((await s.api(`/v1/calls/${callId}?wait=1`)).status).toBe(202);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    s.engine.running(callId)?.cancel('test over');
    const r = await result(s, callId);
    expect(r).toMatchObject({ callId, tool: 'cooperative', session: 'http-1', status: 'cancelled', complete: false });
    // The same result again, byte for byte.
    expect(await (await s.api(`/v1/calls/${callId}`)).json()).toEqual(r);
    await expectError(await s.api('/v1/calls/no-such-call'), 404, 'ENOTFOUND');
    await expectError(await s.api(`/v1/calls/${callId}?wait=61`), 400, 'EBADARGS');
    await expectError(await s.api(`/v1/calls/${callId}?other=1`), 400, 'EBADARGS');
  });

  it('GET /v1/read returns pages of artifacts (streams, offsets) and files', async () => {
    const s = await startTestServer();
    const id = await s.start('bash', { command: 'seq 1 2500; echo err >&2' });
    const r = await result(s, id);
    expect(r.status).toBe('success');
    const manifest = r.output?.kind === 'streams' ? r.output.manifest : '';
    const q = (p: string) => s.api(`/v1/read?${p}`);
    const page = readPageSchema.parse(
      await json(await q(`filePath=artifact://${manifest}/stdout&offset=2490&limit=5`)),
    );
    expect(page).toEqual({
      content: '2491\n2492\n2493\n2494\n2495\n',
      offset: 2490,
      lines: 5,
      totalLines: 2500,
      nextOffset: 2495,
      nextByteOffset: null,
      lossy: false,
    });
    const last = readPageSchema.parse(
      await json(await q(`filePath=${encodeURIComponent(`artifact://${manifest}/stderr`)}`)),
    );
    expect(last).toEqual({
      content: 'err\n',
      offset: 0,
      lines: 1,
      totalLines: 1,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    const bare = readPageSchema.parse(await json(await q(`filePath=artifact://${manifest}`)));
    expect(JSON.parse(bare.content).streams.map((x: { name: string }) => x.name)).toEqual(['stdout', 'stderr']);
    await fsp.writeFile(join(s.dir, 'notes.txt'), 'alpha\nbeta\n');
    const file = readPageSchema.parse(await json(await q(`filePath=${encodeURIComponent(join(s.dir, 'notes.txt'))}`)));
    expect(file).toMatchObject({ offset: 0, lines: 2, totalLines: 2, nextOffset: null });
    expect(file.content).toContain('alpha');
  });

  it('GET /v1/read with Accept: application/octet-stream returns the exact stored bytes, the rest in headers', async () => {
    const s = await startTestServer();
    const id = await s.start('bash', { command: 'printf "a\\xffb\\n"; head -c 3000000 /dev/zero | tr "\\0" x' });
    const r = await result(s, id);
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const uri = encodeURIComponent(`artifact://${r.output.manifest}/stdout`);
    const bytes = { headers: { accept: 'application/octet-stream' } };
    const first = await s.api(`/v1/read?filePath=${uri}&limit=1`, bytes);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await first.arrayBuffer())).toEqual(Buffer.from([0x61, 0xff, 0x62, 0x0a]));
    expect(
      Object.fromEntries(
        ['offset', 'lines', 'total-lines', 'next-offset', 'next-byte-offset', 'lossy'].map((h) => [
          h,
          first.headers.get(`sluice-${h}`),
        ]),
      ),
    ).toEqual({
      offset: '0',
      lines: '1',
      'total-lines': '2',
      'next-offset': '1',
      'next-byte-offset': 'null',
      lossy: 'true',
    });
    // The 3 MB line in parts, continued with byteOffset, as JSON.
    const part = readPageSchema.parse(await json(await s.api(`/v1/read?filePath=${uri}&offset=1&limit=1`)));
    expect(part).toMatchObject({ lines: 1, nextOffset: 1, nextByteOffset: 2 * 1024 * 1024, lossy: false });
    const rest = await s.api(`/v1/read?filePath=${uri}&offset=1&byteOffset=${2 * 1024 * 1024}`, bytes);
    expect((await rest.arrayBuffer()).byteLength).toBe(3000000 - 2 * 1024 * 1024);
    expect(rest.headers.get('sluice-next-offset')).toBe('null');
    await expectError(await s.api(`/v1/read?filePath=${uri}&offset=1&byteOffset=x`), 400, 'EBADARGS');
  });

  it('read errors map to statuses: 400 EBADURI/EBADARGS/ENOTMANIFEST, 403 EDENIED, 404 ENOTFOUND/EUNKNOWNSTREAM, 413 ERESOURCELIMIT, 500 EINTEGRITY', async () => {
    const s = await startTestServer();
    const id = await s.start('bash', { command: "echo small; yes $(printf '%01100d' 7) | head -n 2000 >&2" });
    const r = await result(s, id);
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const { manifest, streams } = r.output;
    const stdout = streams[0]?.digest as string;
    const q = (p: string) => s.api(`/v1/read?${p}`);
    await expectError(await q('filePath=artifact://abc'), 400, 'EBADURI');
    await expectError(await q(`filePath=artifact://${manifest}/stdout&limit=0`), 400, 'EBADARGS');
    await expectError(await q(`filePath=artifact://${manifest}/stdout&offset=-1`), 400, 'EBADARGS');
    await expectError(await q(`filePath=artifact://${manifest}/stdout&offset=1&offset=2`), 400, 'EBADARGS');
    await expectError(await q(`filePath=artifact://${manifest}&stream=stdout`), 400, 'EBADARGS');
    await expectError(await q(''), 400, 'EBADARGS');
    await expectError(await q(`filePath=artifact://${stdout}/x`), 400, 'ENOTMANIFEST');
    await expectError(await q('filePath=/etc/hostname'), 403, 'EDENIED');
    await expectError(await q(`filePath=artifact://${ABSENT}`), 404, 'ENOTFOUND');
    await expectError(await q(`filePath=artifact://${manifest}/nope`), 404, 'EUNKNOWNSTREAM');
    await expectError(await q(`filePath=artifact://${manifest}/stderr`), 413, 'ERESOURCELIMIT');
    // A smaller page of the same stream is fine.
    const ok = readPageSchema.parse(await json(await q(`filePath=artifact://${manifest}/stderr&limit=10`)));
    expect(ok).toMatchObject({ lines: 10, totalLines: 2000, nextOffset: 10 });
    // Corrupt the stdout blob: integrity is checked on read.
    const blob = s.engine.store.layout.blobPath(stdout);
    await fsp.chmod(blob, 0o644);
    await fsp.writeFile(blob, 'smalk\n');
    await expectError(await q(`filePath=artifact://${manifest}/stdout`), 500, 'EINTEGRITY');
  });

  it('GET /v1/sessions lists sessions and GET /v1/sessions/:id/replay rebuilds one', async () => {
    const s = await startTestServer();
    expect(sessionsResponseSchema.parse(await json(await s.api('/v1/sessions')))).toEqual({ sessions: [] });
    const a = await s.start('bash', { command: 'echo one' }, { session: 'work' });
    const ra = await result(s, a);
    const b = await s.start('bash', { command: 'echo two; exit 3' }, { session: 'work' });
    const rb = await result(s, b);
    await result(s, await s.start('bash', { command: 'true' }, { session: 'other' }));
    const { sessions } = sessionsResponseSchema.parse(await json(await s.api('/v1/sessions')));
    expect(sessions.map((x) => [x.id, x.calls, x.interrupted])).toEqual([
      ['other', 1, 0],
      ['work', 2, 0],
    ]);
    const replayed = replayedSessionSchema.parse(await json(await s.api('/v1/sessions/work/replay')));
    expect(replayed.session).toBe('work');
    expect(replayed.calls.map((c) => c.result)).toEqual([ra, rb]);
    expect(replayed.calls.map((c) => c.args)).toEqual([{ command: 'echo one' }, { command: 'echo two; exit 3' }]);
    await expectError(await s.api('/v1/sessions/nobody/replay'), 404, 'ENOTFOUND');
    await expectError(await s.api(`/v1/sessions/${'x'.repeat(129)}/replay`), 400, 'EBADARGS');
  });

  it('a replay is streamed call by call (chunked, no length) and a slow reader gets every call, spilled fields included', async () => {
    const s = await startTestServer();
    // Arguments over the 64 KiB inline limit are spilled to a blob and loaded back call by call.
    const pad = 'p'.repeat(100 * 1024);
    const results = [];
    for (let i = 0; i < 12; i++) {
      results.push(await result(s, await s.start('bash', { command: `echo ${i} # ${pad}` }, { session: 'long' })));
    }
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpGet(
        `${s.url}/v1/sessions/long/replay`,
        { headers: { authorization: `Bearer ${s.token}` } },
        resolve,
      );
      req.on('error', reject);
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['transfer-encoding']).toBe('chunked');
    expect(res.headers['content-length']).toBeUndefined();
    // A slow reader still gets everything (that the server then waits for it is tested in json-stream.test.ts).
    const parts: Buffer[] = [];
    for await (const chunk of res) {
      parts.push(chunk as Buffer);
      await new Promise((r) => setTimeout(r, 2));
    }
    const replayed = replayedSessionSchema.parse(JSON.parse(Buffer.concat(parts).toString('utf8')));
    expect(replayed).toMatchObject({ session: 'long', reverted: 0, corruptLines: 0, skippedLines: 0 });
    expect(replayed.calls.map((c) => c.result)).toEqual(results);
    expect(replayed.calls.map((c) => (c.args as { command: string }).command)).toEqual(
      results.map((_, i) => `echo ${i} # ${pad}`),
    );
    expect(replayed).toEqual(JSON.parse(JSON.stringify(await s.engine.replay('long'))));
  });

  it('unknown routes are 404 ENOTFOUND and wrong methods 405 EBADMETHOD with Allow', async () => {
    const s = await startTestServer();
    await expectError(await s.api('/v2/calls'), 404, 'ENOTFOUND');
    await expectError(await s.api('/v1'), 404, 'ENOTFOUND');
    const res = await s.api('/v1/store', { method: 'POST' });
    expect(res.headers.get('allow')).toBe('GET');
    await expectError(res, 405, 'EBADMETHOD');
    const calls = await s.api('/v1/calls', { method: 'DELETE' });
    expect(calls.headers.get('allow')).toBe('GET, POST');
    await expectError(calls, 405, 'EBADMETHOD');
    const del = await s.api('/v1/calls/abc', { method: 'DELETE' });
    expect(del.headers.get('allow')).toBe('GET');
    await expectError(del, 405, 'EBADMETHOD');
  });
});
