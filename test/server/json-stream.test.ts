/**
 * sendJsonArrayStream, which serves replays: one item serialised at a time,
 * waiting for the client to drain, against a real HTTP server and client on
 * loopback. How the bugs show if they return: a slow client makes the server
 * buffer the whole answer (memory grows with the session); a client gone
 * before the head leaves the handler waiting forever for a 'drain' (a request
 * that never finishes holds up shutdown).
 */
import { once } from 'node:events';
import { createServer, get, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { sendJsonArrayStream } from '../../server/http.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A server whose single route is `handler`; resolves to its base URL. */
async function serve(handler: (res: ServerResponse) => Promise<void>): Promise<string> {
  const server = createServer((_req, res) => void handler(res));
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function request(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => get(url, resolve).on('error', reject));
}

const ITEM = 'x'.repeat(64 * 1024);

describe('streaming a JSON array', () => {
  it('produces items only as fast as a paused client drains them, then sends them all in order', async () => {
    const total = 400; // 25 MiB of items: far more than socket buffers hold
    let produced = 0;
    let settled: Promise<void> | undefined;
    let served: ServerResponse | undefined;
    const url = await serve(async (res) => {
      served = res;
      async function* items() {
        for (let i = 0; i < total; i++) {
          produced++;
          yield { i, text: ITEM };
        }
      }
      settled = sendJsonArrayStream(res, 200, { session: 's', reverted: 0 }, 'calls', items());
      await settled;
    });
    const res = await request(url);
    expect(res.headers['transfer-encoding']).toBe('chunked');
    res.pause();
    // Paused: once the server's response is full it waits for 'drain', which a paused client never
    // sends; production stops there, at what the socket buffers hold (a few MiB), not the whole answer.
    while (served?.writableNeedDrain !== true) await new Promise((r) => setTimeout(r, 10));
    const whilePaused = produced;
    expect(whilePaused).toBeGreaterThan(0);
    expect(whilePaused).toBeLessThan(total / 2);
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(produced).toBe(whilePaused);
    const parts: Buffer[] = [];
    res.on('data', (c: Buffer) => parts.push(c));
    res.resume();
    await once(res, 'end');
    await settled;
    const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as {
      session: string;
      reverted: number;
      calls: Array<{ i: number; text: string }>;
    };
    expect(body.session).toBe('s');
    expect(body.reverted).toBe(0);
    expect(body.calls.map((c) => c.i)).toEqual(Array.from({ length: total }, (_, i) => i));
    expect(body.calls.every((c) => c.text === ITEM)).toBe(true);
  });

  it('stops producing when the client goes away mid-answer, and the handler finishes', async () => {
    let produced = 0;
    let settled: Promise<void> | undefined;
    const url = await serve(async (res) => {
      async function* items() {
        for (let i = 0; i < 10_000; i++) {
          produced++;
          yield { i, text: ITEM };
        }
      }
      settled = sendJsonArrayStream(res, 200, {}, 'calls', items());
      await settled;
    });
    const res = await request(url);
    res.pause();
    await new Promise((r) => setTimeout(r, 100));
    res.destroy();
    await settled;
    expect(produced).toBeLessThan(10_000);
  });

  it('a client gone before the head was written ends the handler at once, writing nothing', async () => {
    let clientGone: () => void = () => {};
    const gone = new Promise<void>((r) => {
      clientGone = r;
    });
    let produced = 0;
    let outcome: Promise<string> | undefined;
    const url = await serve(async (res) => {
      // As when the client leaves while the session log is still being read.
      await gone;
      await new Promise((r) => setTimeout(r, 50));
      async function* items() {
        produced++;
        yield { i: 0 };
      }
      outcome = sendJsonArrayStream(res, 200, {}, 'calls', items()).then(() => (res.headersSent ? 'sent' : 'nothing'));
    });
    const req = get(url);
    req.on('error', () => {});
    await new Promise((r) => setTimeout(r, 50));
    req.destroy();
    clientGone();
    await new Promise((r) => setTimeout(r, 150));
    await expect(Promise.race([outcome, new Promise((r) => setTimeout(() => r('hung'), 2000))])).resolves.toBe(
      'nothing',
    );
    expect(produced).toBe(0);
  });
});
