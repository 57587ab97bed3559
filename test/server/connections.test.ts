/**
 * Idle, unauthenticated connections cannot starve the token holder: at most
 * `maxUnauthenticatedConnections` of them are kept (the oldest is closed for
 * each one beyond), and a request whose headers do not arrive within
 * `headersTimeoutMs` is closed. How it showed before: 240 half-sent requests
 * to a `sluice serve` limited to 256 descriptors made it reset the token
 * holder's connections.
 */
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, printedToken, type ServeChild, spawnServe, startTestServer, tempDir } from './helpers.js';

const children: ServeChild[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const c of children.splice(0)) {
    if (c.child.exitCode === null) c.child.kill('SIGKILL');
    await c.exited;
  }
  await cleanup();
});

/** A connection that sends the start of a request and never finishes its headers. Resolves once connected. */
function halfSent(url: string): Promise<{ socket: Socket; closed: Promise<string> }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.off('error', reject);
      // Reset by the server when it closes the connection: that is the point.
      socket.on('error', () => {});
      socket.write(`GET /v1/info HTTP/1.1\r\nHost: ${hostname}\r\nX-Slow: `);
      resolve({ socket, closed });
    });
    socket.on('data', (b: Buffer) => {
      answer += b.toString('latin1');
    });
    const closed = new Promise<string>((r) => socket.once('close', () => r(answer)));
    socket.once('error', reject);
    sockets.push(socket);
  });
}

describe('connection limits', () => {
  it('beyond maxUnauthenticatedConnections the oldest idle connection is closed; the token holder gets through', async () => {
    const s = await startTestServer([], { maxUnauthenticatedConnections: 8 });
    const idle = [];
    for (let i = 0; i < 40; i++) idle.push(await halfSent(s.url));
    // The 32 oldest are closed to keep 8 (the token holder's connection then takes one more).
    await Promise.all(idle.slice(0, 32).map((c) => c.closed));
    const res = await s.api('/v1/info');
    expect(res.status).toBe(200);
    // Once authenticated, the token holder's connection no longer counts: 40 more idle ones do not close it.
    for (let i = 0; i < 40; i++) idle.push(await halfSent(s.url));
    expect((await s.api('/v1/info')).status).toBe(200);
  });

  it('a request whose headers do not arrive in time is answered 408 and closed', async () => {
    const s = await startTestServer([], { headersTimeoutMs: 200 });
    const c = await halfSent(s.url);
    expect(await c.closed).toMatch(/^HTTP\/1\.1 408 /);
    expect((await s.api('/v1/info')).status).toBe(200);
  });

  it('240 half-sent requests to sluice serve under a 256-descriptor limit: the token holder is served', async () => {
    const dir = await tempDir();
    const child = await spawnServe(['--store', join(dir, 'store')], {}, { fdLimit: 256 });
    children.push(child);
    const token = printedToken(child.stdout()) as string;
    const idle = [];
    for (let i = 0; i < 240; i++) idle.push(await halfSent(child.url));
    // The server kept at most 64 of them; wait until it has closed the others.
    await Promise.all(idle.slice(0, 240 - 64).map((c) => c.closed));
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${child.url}/v1/info`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
    }
  });
});
