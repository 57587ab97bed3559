/**
 * A service (or a proxy in front of it) may answer a ranged GET with the
 * whole object (HTTP allows a server to ignore Range). The object layer
 * must then fail the read, never hand back the object's first bytes as the
 * bytes at the range's start: after a blob has been verified once, page
 * reads are not hashed again, so such bytes would reach a reader without
 * EINTEGRITY. Tested against a real HTTP server that ignores Range.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { S3Objects } from '../../store/s3/objects.js';
import { loadS3Sdk } from '../../store/s3/sdk.js';

const BODY = Buffer.from('0123456789abcdefghijklmnopqrstuvwxyz');
let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

/** An S3-shaped server whose GET ignores Range (200, the whole object) or honours it (206). */
async function serve(honourRange: boolean): Promise<string> {
  const srv = createServer((req, res) => {
    req.resume();
    const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    if (honourRange && range) {
      const start = Number(range[1]);
      const end = Math.min(BODY.length - 1, Number(range[2]));
      res.writeHead(206, {
        'Content-Range': `bytes ${start}-${end}/${BODY.length}`,
        'Content-Length': end - start + 1,
        ETag: '"e"',
      });
      res.end(BODY.subarray(start, end + 1));
      return;
    }
    res.writeHead(200, { 'Content-Length': BODY.length, ETag: '"e"' });
    res.end(BODY);
  });
  server = srv;
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

async function objectsAt(endpoint: string): Promise<S3Objects> {
  return S3Objects.connect(await loadS3Sdk(), 'bucket', {
    env: { AWS_ENDPOINT_URL_S3: endpoint },
    clientConfig: { credentials: { accessKeyId: 'k', secretAccessKey: 's' }, maxAttempts: 1 },
  });
}

describe('a ranged GET answered with the whole object', () => {
  it('fails with EDISK instead of returning the bytes at offset 0 for a later range', async () => {
    const objects = await objectsAt(await serve(false));
    try {
      await expect(objects.getRange('k', 10, 20)).rejects.toMatchObject({ code: 'EDISK' });
      // A range from 0 is the object's first bytes either way.
      expect((await objects.getRange('k', 0, 10)).toString()).toBe('0123456789');
    } finally {
      objects.destroy();
    }
  });

  it('returns exactly the range when the service honours it', async () => {
    const objects = await objectsAt(await serve(true));
    try {
      expect((await objects.getRange('k', 10, 20)).toString()).toBe('abcdefghij');
    } finally {
      objects.destroy();
    }
  });
});
