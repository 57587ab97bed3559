/**
 * Live events of a call: started, then display deltas in order, then
 * completed, last. The final display replaces the live display (it is not
 * appended to it), and neither is rebuilt from the output streams.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../engine/index.js';
import { closeEngines, engineWith, streamBytes, waitForDisplay } from '../support/engines.js';

afterEach(closeEngines);

type Ev = CallEvent | { type: 'lagged'; dropped: number };

async function collect(events: AsyncIterableIterator<Ev>): Promise<Ev[]> {
  const out: Ev[] = [];
  for await (const ev of events) out.push(ev);
  return out;
}

describe('live events', () => {
  it('started → display deltas → completed, in order, on the call and on the engine', async () => {
    const { engine } = await engineWith(['script-streams']);
    const engineEvents = engine.events();
    const displays = ['step 1\n', 'step 2\n', 'step 3\n'];
    const handle = engine.call('script-streams', {
      steps: displays.map((display, i) => ({ stream: 'results', text: `r${i}\n`, display, sleepMs: 20 })),
      finalDisplay: 'FINAL: 3 steps',
    });
    const events = await collect(handle.events());
    expect(events[0]).toMatchObject({ type: 'started', callId: handle.callId, tool: 'script-streams' });
    const last = events.at(-1);
    expect(last).toMatchObject({ type: 'completed', callId: handle.callId });
    const middle = events.slice(1, -1);
    expect(middle.every((e) => e.type === 'display')).toBe(true);
    // Deltas may be coalesced while waiting for credit, never reordered or lost.
    expect(middle.map((e) => (e.type === 'display' ? e.text : '')).join('')).toBe(displays.join(''));

    const r = await handle.result;
    expect(last?.type === 'completed' && last.result).toEqual(r);
    // The final display replaces the live one: it is not live + final.
    expect(r.display).toBe('FINAL: 3 steps');
    expect(handle.liveDisplay).toBe(displays.join(''));
    // Display never enters the output.
    expect(await streamBytes(engine, r)).toEqual({ results: 'r0\nr1\nr2\n', diagnostics: '' });

    const seen: Ev[] = [];
    for await (const ev of engineEvents) {
      if ('callId' in ev && ev.callId !== handle.callId) continue;
      seen.push(ev);
      if (ev.type === 'completed') break;
    }
    expect(seen.map((e) => e.type)).toEqual(events.map((e) => e.type));
  });

  // How the bug shows if it returns: an embedder's `for await (engine.events())` hangs forever after close.
  it('engine.events() ends after the engine closes, with every completed event delivered', async () => {
    const { engine } = await engineWith([]);
    const seen: string[] = [];
    const pump = (async () => {
      for await (const ev of engine.events()) seen.push(ev.type);
    })();
    const handle = engine.call('bash', { command: 'sleep 5' });
    await new Promise((r) => setTimeout(r, 100));
    await engine.close();
    await pump;
    expect((await handle.result).status).toBe('cancelled');
    expect(seen[0]).toBe('started');
    expect(seen.at(-1)).toBe('completed');
  });

  it('a handle looked up with running() follows the live display as it grows', async () => {
    const { engine } = await engineWith(['cooperative']);
    const handle = engine.call('cooperative', {});
    // Looked up before anything was displayed or sent.
    const looked = engine.running(handle.callId);
    expect(looked?.liveDisplay).toBe('');
    await waitForDisplay(handle, 'ready');
    // Regression: running() once copied liveDisplay and maxInFlight at lookup time, so they stayed empty.
    expect(looked?.liveDisplay).toBe('ready');
    expect(looked?.maxInFlight).toBeGreaterThan(0);
    looked?.cancel();
    const r = await handle.result;
    expect(r.status).toBe('cancelled');
    expect(engine.running(handle.callId)).toBeUndefined();
  });

  it('without a final display the runtime writes a summary, not the output or the live display', async () => {
    const { engine } = await engineWith(['script-single']);
    const handle = engine.call('script-single', { steps: [{ text: 'OUTPUT-TEXT\n', display: 'LIVE-TEXT' }] });
    const r = await handle.result;
    expect(r.status).toBe('success');
    expect(handle.liveDisplay).toBe('LIVE-TEXT');
    expect(r.display).not.toContain('LIVE-TEXT');
    expect(r.display).not.toContain('OUTPUT-TEXT');
    expect(r.display).toContain('script-single');
  });

  it('bash shows its output live and ends with an exit-status display', async () => {
    const { engine } = await engineWith([]);
    const handle = engine.call('bash', { command: 'echo one; sleep 0.1; echo two >&2; exit 4' });
    const events = await collect(handle.events());
    const live = events.map((e) => (e.type === 'display' ? e.text : '')).join('');
    expect(live).toContain('one');
    expect(live).toContain('two');
    const r = await handle.result;
    expect(r).toMatchObject({ status: 'failed', complete: true, metadata: { exitCode: 4 } });
    expect(r.display).toContain('exit code 4');
    expect(r.display.startsWith(live)).toBe(false);
  });
});

describe('display frames', () => {
  it('splits long display text into bounded events without breaking a surrogate pair', async () => {
    const { displayFrames, MAX_DISPLAY_EVENT_CHARS } = await import('../../engine/presentation/display.js');
    const text = `${'a'.repeat(MAX_DISPLAY_EVENT_CHARS - 1)}😀${'b'.repeat(MAX_DISPLAY_EVENT_CHARS * 2)}`;
    const frames = displayFrames(text);
    expect(frames.join('')).toBe(text);
    expect(frames.every((f) => f.length <= MAX_DISPLAY_EVENT_CHARS)).toBe(true);
    expect(frames[0]).toBe('a'.repeat(MAX_DISPLAY_EVENT_CHARS - 1));
    expect(frames[1]?.startsWith('😀')).toBe(true);
    expect(displayFrames('short')).toEqual(['short']);
  });
});
