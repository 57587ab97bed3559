/**
 * Request bodies: validated with the wire schemas (400 with a code naming the
 * field), bounded in size (413 ERESOURCELIMIT, by declared length or while
 * reading a chunked body, without reading the rest), JSON only (415).
 * Nothing is started by a rejected request, and the server keeps serving.
 */

import { once } from 'node:events';
import { request } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { errorBodySchema, terminalResultSchema } from '../../engine/wire/schemas.js';
import { cleanup, expectNoLeaks, startTestServer, type TestServer } from './helpers.js';

afterEach(cleanup);

function post(s: TestServer, path: string, body: string, type = 'application/json'): Promise<Response> {
  return s.api(path, { method: 'POST', headers: { 'content-type': type }, body });
}

async function expectError(res: Response, status: number, code: string): Promise<string> {
  const body = errorBodySchema.parse(await res.json());
  expect([res.status, body.error.code]).toEqual([status, code]);
  return body.error.message;
}

/** Sends a chunked body of `total` bytes in 64 KiB pieces with node:http; resolves with the status and body. */
function chunkedPost(s: TestServer, total: number): Promise<{ status: number; body: string; sent: number }> {
  const { hostname, port } = new URL(s.url);
  return new Promise((resolve, reject) => {
    let sent = 0;
    const req = request(
      {
        host: hostname,
        port,
        method: 'POST',
        path: '/v1/calls',
        headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, sent }));
      },
    );
    req.on('error', reject);
    const piece = Buffer.alloc(64 * 1024, 0x20);
    const pump = () => {
      while (sent < total) {
        sent += piece.length;
        if (!req.write(piece)) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    req.write('{"tool":"bash","args":{"command":"echo');
    pump();
  });
}

describe('request bodies', () => {
  it('invalid JSON, non-objects and schema violations are 400 EBADARGS naming the problem', async () => {
    const s = await startTestServer();
    expect(await expectError(await post(s, '/v1/calls', '{"tool": '), 400, 'EBADARGS')).toMatch(/not valid JSON/);
    await expectError(await post(s, '/v1/calls', '[]'), 400, 'EBADARGS');
    await expectError(await post(s, '/v1/calls', 'null'), 400, 'EBADARGS');
    await expectError(await post(s, '/v1/calls', '"bash"'), 400, 'EBADARGS');
    expect(await expectError(await post(s, '/v1/calls', '{"args":{}}'), 400, 'EBADARGS')).toMatch(/field tool/);
    expect(await expectError(await post(s, '/v1/calls', '{"tool":5}'), 400, 'EBADARGS')).toMatch(/field tool.*got 5/);
    expect(await expectError(await post(s, '/v1/calls', '{"tool":"bash","extra":1}'), 400, 'EBADARGS')).toMatch(
      /extra/,
    );
    expect(await expectError(await post(s, '/v1/calls', '{"tool":"bash","timeoutMs":-1}'), 400, 'EBADARGS')).toMatch(
      /timeoutMs/,
    );
    expect(await expectError(await post(s, '/v1/calls', '{"tool":"bash","session":"a/b"}'), 400, 'EBADARGS')).toMatch(
      /session id "a\/b"/,
    );
    expect(await expectError(await post(s, '/v1/calls', '{"tool":"nope"}'), 400, 'EUNKNOWNTOOL')).toMatch(/nope/);
    await expectError(await post(s, '/v1/calls', ''), 400, 'EBADARGS');
    expect(await s.engine.sessions()).toEqual([]);
    await expectNoLeaks(s);
  });

  it('a body that is not application/json is 415', async () => {
    const s = await startTestServer();
    const msg = await expectError(await post(s, '/v1/calls', '{"tool":"bash"}', 'text/plain'), 415, 'EBADARGS');
    expect(msg).toMatch(/application\/json.*text\/plain/);
    // A charset parameter is fine.
    const ok = await post(
      s,
      '/v1/calls',
      '{"tool":"bash","args":{"command":"true"}}',
      'application/json; charset=utf-8',
    );
    expect(ok.status).toBe(202);
  });

  it('arguments that fail the tool schema are accepted, and the call fails with EBADARGS', async () => {
    const s = await startTestServer();
    const res = await post(s, '/v1/calls', '{"tool":"bash","args":{"cmd":"ls"}}');
    expect(res.status).toBe(202);
    const { callId } = (await res.json()) as { callId: string };
    const r = terminalResultSchema.parse(await (await s.api(`/v1/calls/${callId}?wait=30`)).json());
    expect(r).toMatchObject({ status: 'failed', error: { code: 'EBADARGS' } });
  });

  it('a body at the limit is read; one byte over is 413 ERESOURCELIMIT, by Content-Length or while reading', async () => {
    const limit = 1024;
    const s = await startTestServer([], { maxBodyBytes: limit });
    const body = (n: number) => {
      const head = '{"tool":"bash","args":{"command":"true #';
      return `${head}${'x'.repeat(n - head.length - 3)}"}}`;
    };
    expect(Buffer.byteLength(body(limit))).toBe(limit);
    expect((await post(s, '/v1/calls', body(limit))).status).toBe(202);
    const over = await post(s, '/v1/calls', body(limit + 1));
    expect(over.headers.get('connection')).toBe('close');
    expect(await expectError(over, 413, 'ERESOURCELIMIT')).toMatch(/1024 bytes/);
    // Chunked, no declared length: cut off while reading, long before the client finished sending 64 MiB.
    const chunked = await chunkedPost(s, 64 * 1024 * 1024);
    expect(chunked.status).toBe(413);
    expect(errorBodySchema.parse(JSON.parse(chunked.body)).error.code).toBe('ERESOURCELIMIT');
    expect((await s.api('/v1/info')).status).toBe(200);
  });

  it('a client still sending an oversized declared body gets the 413 and no reset', async () => {
    const s = await startTestServer([], { maxBodyBytes: 1024 });
    const { hostname, port } = new URL(s.url);
    const total = 2 * 1024 * 1024;
    // A slow sender: the server has answered long before the last piece leaves.
    const sock = connect(Number(port), hostname);
    await once(sock, 'connect');
    sock.write(
      `POST /v1/calls HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${s.token}\r\ncontent-type: application/json\r\ncontent-length: ${total}\r\n\r\n`,
    );
    let answer = '';
    sock.setEncoding('latin1');
    sock.on('data', (c: string) => {
      answer += c;
    });
    const errors: string[] = [];
    sock.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
    const piece = Buffer.alloc(64 * 1024, 0x20);
    for (let sent = 0; sent < total && errors.length === 0 && !sock.destroyed; sent += piece.length) {
      if (!sock.write(piece)) await once(sock, 'drain');
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise<void>((resolve) => {
      if (sock.closed) resolve();
      else sock.once('close', () => resolve());
    });
    expect(errors).toEqual([]);
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toMatch(/ERESOURCELIMIT/);
    expect((await s.api('/v1/info')).status).toBe(200);
  });

  it('the default limit is 1 MiB', async () => {
    const s = await startTestServer();
    const big = JSON.stringify({ tool: 'bash', args: { command: `true ${'y'.repeat(1024 * 1024)}` } });
    await expectError(await post(s, '/v1/calls', big), 413, 'ERESOURCELIMIT');
    expect(await s.engine.sessions()).toEqual([]);
  });

  it('a cancel body is optional but validated', async () => {
    const s = await startTestServer(['cooperative']);
    const id = await s.start('cooperative', {});
    await expectError(await post(s, `/v1/calls/${id}/cancel`, '{"reason":5}'), 400, 'EBADARGS');
    await expectError(await post(s, `/v1/calls/${id}/cancel`, '{"why":"x"}'), 400, 'EBADARGS');
    expect((await s.api(`/v1/calls/${id}`)).status).toBe(202);
    const ok = await s.api(`/v1/calls/${id}/cancel`, { method: 'POST' });
    expect([ok.status, await ok.json()]).toEqual([202, { callId: id, status: 'cancelling' }]);
    const r = terminalResultSchema.parse(await (await s.api(`/v1/calls/${id}?wait=30`)).json());
    expect(r.error).toMatchObject({ code: 'ECANCELLED', message: 'cancelled over HTTP' });
    await expectNoLeaks(s);
  });
});
