/**
 * Live events over server-sent events: order (started → display… →
 * completed, ids 1, 2, 3…), resume with Last-Event-ID mid-call and after the
 * end (204 once the client has the terminal event), gaps reported as
 * `lagged`, many subscribers seeing the same terminal event, cancellation
 * over HTTP, and keep-alive comments.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { subscriptionEventSchema, terminalResultSchema } from '../../engine/wire/schemas.js';
import {
  cleanup,
  expectNoLeaks,
  ids,
  parseSse,
  readEvents,
  type SseEvent,
  startTestServer,
  type TestServer,
} from './helpers.js';

afterEach(cleanup);

/** Script steps that display `n` lines, `sleepMs` apart. */
function displaySteps(n: number, sleepMs: number) {
  return Array.from({ length: n }, (_, i) => ({ stream: 'results', text: `r${i}\n`, display: `step ${i}\n`, sleepMs }));
}

function events(s: TestServer, id: string, headers: Record<string, string> = {}, query = ''): Promise<Response> {
  return s.api(`/v1/calls/${id}/events${query}`, { headers });
}

/** Checks every event's data against the wire schema and its name against its type; returns the parsed data. */
function parsed(list: SseEvent[]) {
  return list.map((e) => {
    const data = subscriptionEventSchema.parse(JSON.parse(e.data));
    expect(data.type).toBe(e.event);
    return data;
  });
}

function displayText(list: SseEvent[]): string {
  return parsed(list)
    .map((d) => (d.type === 'display' ? d.text : ''))
    .join('');
}

describe('server-sent events', () => {
  it('started → display deltas → completed, ids 1..n in order, then the stream ends', async () => {
    const s = await startTestServer(['script-streams']);
    const id = await s.start('script-streams', { steps: displaySteps(5, 20), finalDisplay: 'FINAL' });
    const list = await readEvents(await events(s, id));
    expect(ids(list)).toEqual(list.map((_, i) => i + 1));
    expect(list[0]?.event).toBe('started');
    expect(list.at(-1)?.event).toBe('completed');
    expect(list.slice(1, -1).every((e) => e.event === 'display')).toBe(true);
    expect(displayText(list)).toBe('step 0\nstep 1\nstep 2\nstep 3\nstep 4\n');
    const done = parsed(list).at(-1);
    const result = terminalResultSchema.parse(await (await s.api(`/v1/calls/${id}`)).json());
    expect(done).toEqual({ type: 'completed', callId: id, result });
    expect(result.display).toBe('FINAL');
  });

  it('a client that reconnects mid-call with Last-Event-ID continues after that id, without gaps or repeats', async () => {
    const s = await startTestServer(['script-streams']);
    const id = await s.start('script-streams', { steps: displaySteps(8, 120) });
    const first = await readEvents(await events(s, id), 3);
    expect(first.map((e) => e.event)).toEqual(['started', 'display', 'display']);
    expect(ids(first)).toEqual([1, 2, 3]);
    // Disconnected while the call runs; it goes on without us.
    const rest = await readEvents(await events(s, id, { 'last-event-id': '3' }));
    expect(ids(rest)).toEqual(rest.map((_, i) => i + 4));
    expect(rest.at(-1)?.event).toBe('completed');
    expect(displayText([...first, ...rest])).toBe(
      displaySteps(8, 0)
        .map((x) => x.display)
        .join(''),
    );
  });

  it('after the end: the rest and the terminal event, 204 once the client has it, the whole story for a new client', async () => {
    const s = await startTestServer(['script-streams']);
    const id = await s.start('script-streams', { steps: displaySteps(4, 0) });
    const all = await readEvents(await events(s, id));
    const last = Number(all.at(-1)?.id);
    expect(all.at(-1)?.event).toBe('completed');
    const again = await readEvents(await events(s, id));
    expect(again).toEqual(all);
    const tail = await readEvents(await events(s, id, { 'last-event-id': '2' }));
    expect(tail).toEqual(all.slice(2));
    // The same through the query parameter, for clients that cannot set headers.
    expect(await readEvents(await events(s, id, {}, '?lastEventId=2'))).toEqual(all.slice(2));
    for (const seen of [String(last), String(last + 5)]) {
      const res = await events(s, id, { 'last-event-id': seen });
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
    }
    expect((await events(s, id, { 'last-event-id': 'x' })).status).toBe(400);
  });

  it('a Last-Event-ID past the newest event of a running call is 400', async () => {
    const s = await startTestServer(['cooperative']);
    const id = await s.start('cooperative', {});
    const res = await events(s, id, { 'last-event-id': '99' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'EBADARGS' } });
    await s.api(`/v1/calls/${id}/cancel`, { method: 'POST' });
  });

  it('events no longer buffered are reported as one lagged event with the right count and id', async () => {
    const s = await startTestServer(['script-streams'], { bufferEvents: 3 });
    const id = await s.start('script-streams', { steps: displaySteps(9, 0) });
    terminalResultSchema.parse(await (await s.api(`/v1/calls/${id}?wait=30`)).json());
    const list = await readEvents(await events(s, id));
    const data = parsed(list);
    const completedId = Number(list.at(-1)?.id);
    expect(list.map((e) => e.event)).toEqual(['lagged', 'display', 'display', 'display', 'completed']);
    // Frames 1..completedId-1 existed; the last three are kept: the lagged event stands for the others.
    expect(data[0]).toEqual({ type: 'lagged', dropped: completedId - 4 });
    expect(ids(list)).toEqual([completedId - 4, completedId - 3, completedId - 2, completedId - 1, completedId]);
  });

  it('a display delta longer than one frame is split into several frames that join to it', async () => {
    const s = await startTestServer(['script-single']);
    const big = `${'é'.repeat(20_000)}😀${'z'.repeat(20_000)}`;
    const id = await s.start('script-single', { steps: [{ display: big }] });
    const list = await readEvents(await events(s, id));
    expect(list.filter((e) => e.event === 'display').length).toBeGreaterThanOrEqual(3);
    expect(displayText(list)).toBe(big);
  });

  it('20 subscribers of one call all receive the same events and the same terminal event', async () => {
    const s = await startTestServer(['script-streams']);
    const id = await s.start('script-streams', { steps: displaySteps(6, 50) });
    const lists = await Promise.all(Array.from({ length: 20 }, async () => readEvents(await events(s, id))));
    const terminal = lists.map((l) => l.at(-1));
    expect(terminal.every((t) => t?.event === 'completed')).toBe(true);
    expect(new Set(terminal.map((t) => t?.data)).size).toBe(1);
    expect(new Set(terminal.map((t) => t?.id)).size).toBe(1);
    for (const l of lists) expect(l).toEqual(lists[0]);
    const result = await (await s.api(`/v1/calls/${id}`)).json();
    expect(JSON.parse(terminal[0]?.data as string).result).toEqual(result);
  });

  it('cancel over HTTP: subscribers get a cancelled terminal event, recorded in the session, and nothing is left', async () => {
    const s = await startTestServer(['cooperative']);
    const id = await s.start('cooperative', { sleep: '1000.424242', onAbort: 'return' }, { session: 'cx' });
    const res = await events(s, id);
    const reading = readEvents(res);
    // Wait until the tool said it is ready (its sleep child is running), however long a loaded
    // machine takes: a cancel before that would race the tool's start, not test the cancel.
    // A call that ended instead (the tool failed to start) fails here, rather than spinning until the test's timeout.
    while (s.engine.running(id) && s.engine.running(id)?.liveDisplay !== 'ready') {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(s.engine.running(id)?.liveDisplay).toBe('ready');
    const cancel = await s.api(`/v1/calls/${id}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'user pressed stop' }),
    });
    expect([cancel.status, await cancel.json()]).toEqual([202, { callId: id, status: 'cancelling' }]);
    const list = await reading;
    const done = parsed(list).at(-1);
    expect(done?.type).toBe('completed');
    const result = done?.type === 'completed' ? done.result : undefined;
    expect(result).toMatchObject({
      status: 'cancelled',
      complete: false,
      error: { code: 'ECANCELLED', message: 'user pressed stop' },
    });
    const again = await s.api(`/v1/calls/${id}/cancel`, { method: 'POST' });
    expect([again.status, await again.json()]).toEqual([200, { callId: id, status: 'cancelled' }]);
    const replay = (await (await s.api('/v1/sessions/cx/replay')).json()) as {
      calls: Array<{ result: unknown; interrupted: boolean }>;
    };
    expect(replay.calls).toEqual([
      { callId: id, tool: 'cooperative', args: expect.anything(), result, interrupted: false },
    ]);
    await expectNoLeaks(s);
  });

  it('an idle stream gets keep-alive comments', async () => {
    const s = await startTestServer(['cooperative'], { heartbeatMs: 100 });
    const id = await s.start('cooperative', {});
    const res = await events(s, id);
    const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    const until = Date.now() + 5000;
    while (!text.includes(': keep-alive\n\n') && Date.now() < until) text += (await reader.read()).value ?? '';
    expect(text).toContain(': keep-alive\n\n');
    await reader.cancel();
    await s.api(`/v1/calls/${id}/cancel`, { method: 'POST' });
  });
  it('with ?progress=true, unnumbered progress events (bytes and lines per stream) come between the numbered ones', async () => {
    const s = await startTestServer();
    const gate = join(s.dir, 'gate');
    const id = await s.start('bash', {
      command: `printf 'one\\n'; while [ ! -e ${gate} ]; do sleep 0.02; done; printf 'two\\nthree\\n'`,
    });
    const plain = events(s, id);
    const res = await events(s, id, {}, '?progress=true');
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    // Read until the first progress event (the call waits at the gate meanwhile), then let it finish.
    while (!/event: progress\n/.test(text)) {
      const { value, done } = await reader.read();
      expect(done, 'the stream ended before any progress event').toBe(false);
      text += value;
    }
    await fsp.writeFile(gate, '');
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    const all = parseSse(text);
    const progress = all.filter((e) => e.event === 'progress');
    const numbered = all.filter((e) => e.event !== 'progress');
    // Progress carries no id (a client's Last-Event-ID never moves on it); the numbered events are as without it.
    expect(progress.every((e) => e.id === undefined)).toBe(true);
    expect(ids(numbered)).toEqual(numbered.map((_, i) => i + 1));
    const without = await readEvents(await plain);
    expect(without.map((e) => [e.id, e.event])).toEqual(numbered.map((e) => [e.id, e.event]));
    expect(all.at(-1)?.event).toBe('completed');
    const result = terminalResultSchema.parse(await (await s.api(`/v1/calls/${id}`)).json());
    let last = 0;
    for (const p of parsed(progress)) {
      if (p.type !== 'progress') throw new Error(`not a progress event: ${p.type}`);
      expect(p.callId).toBe(id);
      const stdout = p.streams.find((x) => x.name === 'stdout');
      expect(stdout).toBeDefined();
      // Never backwards, never past what was published.
      expect(stdout?.bytes).toBeGreaterThanOrEqual(last);
      last = stdout?.bytes ?? 0;
    }
    expect(last).toBeGreaterThanOrEqual(4);
    const published =
      result.output?.kind === 'streams' ? result.output.streams.find((x) => x.name === 'stdout') : undefined;
    expect(published?.bytes).toBe(14);
    expect(last).toBeLessThanOrEqual(14);
    expect((await s.api(`/v1/calls/${id}/events?progress=maybe`)).status).toBe(400);
    await expectNoLeaks(s);
  });
});
