/**
 * The endpoints the web view reads (docs/http.md): the calls list and its
 * server-wide live stream, the counters for the chart, the store with the
 * last collection and verification, session revert, and the static files
 * served without the token under a strict Content-Security-Policy.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  callsResponseSchema,
  gcReportSchema,
  revertResponseSchema,
  serverEventSchema,
  statsResponseSchema,
  storeResponseSchema,
  terminalResultSchema,
  verifyReportSchema,
} from '../../engine/wire/schemas.js';
import type { CallTracker } from '../../server/tracker.js';
import { WEB_CSP } from '../../server/web.js';
import { cleanup, expectNoLeaks, readEvents, sleep, startTestServer } from './helpers.js';

afterEach(cleanup);

/** The summaries stream's live subscriptions (one per open `GET /v1/events`). */
function summarySubscribers(s: Awaited<ReturnType<typeof startTestServer>>): number {
  return (s.server as unknown as { tracker: CallTracker }).tracker.summaries.subscriberCount;
}

/** POSTs `body` (a string, sent as is) as JSON to `path`. */
function postRaw(s: Awaited<ReturnType<typeof startTestServer>>, path: string, body: string): Promise<Response> {
  return s.api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
}

/** The error code of an error response, checking its status. */
async function errorCode(res: Response, status: number): Promise<string> {
  const body = (await res.json()) as { error: { code: string } };
  expect(res.status, JSON.stringify(body)).toBe(status);
  return body.error.code;
}

async function ok(res: Response): Promise<unknown> {
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body;
}

describe('the web view endpoints', () => {
  it('GET /v1/calls lists a call running, then cancelled and incomplete with the bytes and lines of each stream', async () => {
    const s = await startTestServer();
    const id = await s.start('bash', { command: 'seq 1 5; exec sleep 60' }, { session: 'list' });
    // The progress events fill in the streams while it runs.
    let mine: ReturnType<typeof callsResponseSchema.parse>['calls'][number] | undefined;
    while (mine?.streams.find((x) => x.name === 'stdout')?.lines !== 5) {
      const running = callsResponseSchema.parse(await ok(await s.api('/v1/calls')));
      mine = running.calls.find((c) => c.callId === id);
      await sleep(50);
    }
    expect(mine).toMatchObject({ tool: 'bash', session: 'list', complete: null, durationMs: null });
    const cancel = await s.api(`/v1/calls/${id}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(202);
    const result = terminalResultSchema.parse(await ok(await s.api(`/v1/calls/${id}?wait=30`)));
    const ended = callsResponseSchema.parse(await ok(await s.api('/v1/calls')));
    const done = ended.calls.find((c) => c.callId === id);
    expect(done).toMatchObject({ status: 'cancelled', complete: false, durationMs: result.durationMs });
    expect(done?.streams).toEqual(
      result.output?.kind === 'streams'
        ? result.output.streams.map((x) => ({ name: x.name, bytes: x.bytes, lines: x.lines }))
        : [],
    );
    expect(done?.streams.find((x) => x.name === 'stdout')).toEqual({ name: 'stdout', bytes: 10, lines: 5 });
    expect(done?.version).toBeGreaterThan(mine?.version ?? 0);
    expect(ended.version).toBeGreaterThanOrEqual(done?.version ?? 0);
    await expect(s.api('/v1/calls?x=1').then((r) => r.status)).resolves.toBe(400);
    await expectNoLeaks(s);
  });

  it('GET /v1/events streams each call as it starts and ends, the last summary matching its result', async () => {
    const s = await startTestServer();
    const stream = await s.api('/v1/events');
    const id = await s.start('bash', { command: 'printf "a\\nb\\n"' });
    const result = terminalResultSchema.parse(await ok(await s.api(`/v1/calls/${id}?wait=30`)));
    const reading = readEvents(stream);
    // Shutdown ends the stream: everything it carried is then in hand.
    await s.server.close();
    const events = (await reading).map((e) => {
      expect(e.event).toBe('call');
      return serverEventSchema.parse(JSON.parse(e.data));
    });
    const calls = events.map((e) => ('call' in e ? e.call : undefined));
    expect(calls.every((c) => c?.callId === id)).toBe(true);
    // Started, any progress, ended: each newer than the one before.
    expect(calls[0]?.status).toBe('running');
    expect(calls.slice(0, -1).every((c) => c?.status === 'running')).toBe(true);
    expect(calls.at(-1)?.status).toBe('success');
    const versions = calls.map((c) => c?.version ?? 0);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
    expect(calls.at(-1)?.streams.find((x) => x.name === 'stdout')).toEqual({ name: 'stdout', bytes: 4, lines: 2 });
    expect(calls.at(-1)?.durationMs).toBe(result.durationMs);
    await expectNoLeaks(s);
  });

  it('GET /v1/events ends when the server shuts down', async () => {
    const s = await startTestServer();
    const stream = await s.api('/v1/events');
    const reading = readEvents(stream);
    await s.server.close();
    expect(await reading).toEqual([]);
  });

  it('GET /v1/stats counts calls started and ended and the bytes they captured', async () => {
    const s = await startTestServer();
    const before = statsResponseSchema.parse(await ok(await s.api('/v1/stats')));
    const id = await s.start('bash', { command: 'head -c 3000 /dev/zero' });
    await ok(await s.api(`/v1/calls/${id}?wait=30`));
    const after = statsResponseSchema.parse(await ok(await s.api('/v1/stats')));
    expect(after.callsStarted - before.callsStarted).toBe(1);
    expect(after.callsEnded - before.callsEnded).toBe(1);
    expect(after.capturedBytes - before.capturedBytes).toBe(3000);
    expect(after.running).toBe(0);
  });

  it('GET /v1/store counts blobs and keeps the last collection and verification this server ran', async () => {
    const s = await startTestServer();
    const id = await s.start('bash', { command: 'echo stored' }, { session: 'st' });
    await ok(await s.api(`/v1/calls/${id}?wait=30`));
    const first = storeResponseSchema.parse(await ok(await s.api('/v1/store')));
    expect(first.blobs).toBeGreaterThan(0);
    expect(first.bytes).toBeGreaterThan(0);
    expect(first.root).toBe(s.engine.store.root);
    expect([first.lastGc, first.lastVerify]).toEqual([null, null]);
    const post = (path: string, body: unknown) =>
      s.api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const gc = gcReportSchema.parse(await ok(await post('/v1/gc', { dryRun: true, graceMs: 0 })));
    expect(gc).toMatchObject({ dryRun: true, removed: 0 });
    const verify = verifyReportSchema.parse(await ok(await post('/v1/verify', {})));
    expect(verify).toMatchObject({ corrupt: [], missing: [], records: [] });
    expect(verify.ok).toBe(verify.scanned);
    const second = storeResponseSchema.parse(await ok(await s.api('/v1/store')));
    expect(second.lastGc?.report).toEqual(gc);
    expect(second.lastVerify?.report).toEqual(verify);
    const bad = await post('/v1/gc', { dryRun: 'yes' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('EBADARGS');
    await expectNoLeaks(s);
  });

  it('POST /v1/sessions/:id/revert hides a call and the later ones from replay', async () => {
    const s = await startTestServer();
    const ids: string[] = [];
    for (const n of [1, 2, 3]) {
      const id = await s.start('bash', { command: `echo ${n}` }, { session: 'rv' });
      await ok(await s.api(`/v1/calls/${id}?wait=30`));
      ids.push(id);
    }
    const post = (path: string, body: unknown) =>
      s.api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const reverted = revertResponseSchema.parse(
      await ok(await post('/v1/sessions/rv/revert', { beforeCallId: ids[1] })),
    );
    expect(reverted).toEqual({ session: 'rv', reverted: [ids[1], ids[2]] });
    const replay = (await ok(await s.api('/v1/sessions/rv/replay'))) as {
      calls: Array<{ callId: string }>;
      reverted: number;
    };
    expect(replay.calls.map((c) => c.callId)).toEqual([ids[0]]);
    expect(replay.reverted).toBe(2);
    const unknown = await post('/v1/sessions/nope/revert', { beforeCallId: ids[0] });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('ENOTFOUND');
    const missing = await s.api('/v1/sessions/rv/revert', { method: 'POST' });
    expect(missing.status).toBe(400);
    await expectNoLeaks(s);
  });

  it('revert, gc and verify answer bad bodies with typed errors and change nothing', async () => {
    const s = await startTestServer([], { maxBodyBytes: 1024 });
    const ids: string[] = [];
    for (const n of [1, 2]) {
      const id = await s.start('bash', { command: `echo ${n}` }, { session: 'bad' });
      await ok(await s.api(`/v1/calls/${id}?wait=30`));
      ids.push(id);
    }
    const revert = '/v1/sessions/bad/revert';
    expect(await errorCode(await postRaw(s, revert, '{"beforeCallId":'), 400)).toBe('EBADARGS');
    expect(await errorCode(await postRaw(s, revert, '{"beforeCallId":5}'), 400)).toBe('EBADARGS');
    expect(await errorCode(await postRaw(s, revert, '{"beforeCallId":""}'), 400)).toBe('EBADARGS');
    expect(await errorCode(await postRaw(s, revert, `{"beforeCallId":"${ids[0]}","x":1}`), 400)).toBe('EBADARGS');
    expect(await errorCode(await postRaw(s, revert, '{"beforeCallId":"no-such-call"}'), 404)).toBe('ENOTFOUND');
    const big = JSON.stringify({ beforeCallId: ids[0], pad: 'x'.repeat(2000) });
    expect(await errorCode(await postRaw(s, revert, big), 413)).toBe('ERESOURCELIMIT');
    expect(await errorCode(await postRaw(s, '/v1/gc', '{"graceMs":-1}'), 400)).toBe('EBADARGS');
    expect(await errorCode(await postRaw(s, '/v1/gc', 'not json'), 400)).toBe('EBADARGS');
    expect(await errorCode(await postRaw(s, '/v1/verify', '{"repair":"yes"}'), 400)).toBe('EBADARGS');
    expect(await errorCode(await postRaw(s, '/v1/verify', '[]'), 400)).toBe('EBADARGS');
    // Nothing was reverted, collected or verified.
    const replay = (await ok(await s.api('/v1/sessions/bad/replay'))) as { calls: Array<{ callId: string }> };
    expect(replay.calls.map((c) => c.callId)).toEqual(ids);
    const store = storeResponseSchema.parse(await ok(await s.api('/v1/store')));
    expect([store.lastGc, store.lastVerify]).toEqual([null, null]);
    expect((await s.api('/v1/info')).status).toBe(200);
    await expectNoLeaks(s);
  });

  it('GET /v1/events drops its subscription when the client goes away', async () => {
    const s = await startTestServer();
    expect(summarySubscribers(s)).toBe(0);
    const gone = new AbortController();
    const stream = await s.api('/v1/events', { signal: gone.signal });
    expect(stream.status).toBe(200);
    const second = await s.api('/v1/events');
    expect(summarySubscribers(s)).toBe(2);
    gone.abort();
    await stream.body?.cancel().catch(() => {});
    while (summarySubscribers(s) !== 1) await sleep(10);
    // The other connection still hears of calls.
    const id = await s.start('bash', { command: 'true' });
    const events = await readEvents(second, 1);
    expect(JSON.parse(events[0]?.data ?? '{}')).toMatchObject({ type: 'call', call: { callId: id } });
    while (summarySubscribers(s) !== 0) await sleep(10);
    await ok(await s.api(`/v1/calls/${id}?wait=30`));
    await expectNoLeaks(s);
  });

  it('serves the page and its assets without the token, with CSP, nosniff and no referrer; data still needs it', async () => {
    const s = await startTestServer();
    for (const [path, type] of [
      ['/', 'text/html; charset=utf-8'],
      ['/web/app.js', 'text/javascript; charset=utf-8'],
      ['/web/app.css', 'text/css; charset=utf-8'],
      ['/web/icon.svg', 'image/svg+xml'],
    ] as const) {
      const res = await fetch(`${s.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toBe(type);
      expect(res.headers.get('content-security-policy')).toBe(WEB_CSP);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('sluice-protocol')).toBeNull();
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(0);
    }
    expect(WEB_CSP).toContain("script-src 'self'");
    expect(WEB_CSP).toContain("frame-ancestors 'none'");
    expect(WEB_CSP).not.toContain('unsafe');
    const html = await (await fetch(`${s.url}/`)).text();
    // No inline script: the only script is the file.
    expect(html.match(/<script/g)).toEqual(['<script']);
    expect(html).toContain('<script src="/web/app.js" defer></script>');
    for (const path of ['/v1/calls', '/v1/events', '/v1/store', '/web/other.js', '/index.html']) {
      const res = await fetch(`${s.url}${path}`);
      expect(res.status, path).toBe(401);
      expect(await res.text()).toBe('');
    }
    const posted = await fetch(`${s.url}/`, { method: 'POST' });
    expect(posted.status).toBe(401);
  });
});
