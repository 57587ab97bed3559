/**
 * Calls per second and captured MiB per second over the last five minutes,
 * as an SVG of our own (no charting library to ship). Calls come from the
 * engine's counter of started calls (`GET /v1/stats`), bytes from the calls'
 * live progress (bytes per stream as they are captured, then the published
 * output), so a long call's output shows while it flows, not when it ends.
 */
import { getJson } from './api.js';
import type { CallsModel } from './calls-model.js';
import { h, replace } from './dom.js';
import type { Stats } from './types.js';

const SVG = 'http://www.w3.org/2000/svg';
/** Samples kept: one a second, five minutes. */
const KEEP = 300;
const W = 600;
const HEIGHT = 110;

interface Sample {
  at: number;
  started: number;
  bytes: number;
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string>): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

/** The chart's element, updated every second until `signal` aborts. */
export function chart(model: CallsModel, signal: AbortSignal): HTMLElement {
  const samples: Sample[] = [];
  const picture = svg('svg', {
    class: 'chart',
    viewBox: `0 0 ${W} ${HEIGHT}`,
    width: String(W),
    height: String(HEIGHT),
  });
  const callsNow = h('span', { class: 'legend-calls', attrs: { id: 'rate-calls' } });
  const mibNow = h('span', { class: 'legend-mib', attrs: { id: 'rate-mib' } });
  const box = h(
    'div',
    { class: 'box', attrs: { id: 'chart' } },
    h('div', { class: 'bar' }, h('strong', {}, 'Last 5 minutes'), callsNow, mibNow),
    picture,
  );
  const sample = async () => {
    try {
      const s = await getJson<Stats>('/v1/stats', signal);
      samples.push({ at: Date.now(), started: s.callsStarted, bytes: model.totalBytes() });
      if (samples.length > KEEP + 1) samples.shift();
      draw();
    } catch {
      // Offline or refused: the next tick tries again (a 401 brings the prompt).
    }
  };
  const draw = () => {
    const calls: number[] = [];
    const mib: number[] = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1] as Sample;
      const b = samples[i] as Sample;
      const dt = Math.max(0.001, (b.at - a.at) / 1000);
      calls.push(Math.max(0, b.started - a.started) / dt);
      mib.push(Math.max(0, b.bytes - a.bytes) / dt / 1048576);
    }
    const maxCalls = Math.max(1, ...calls);
    const maxMib = Math.max(0.1, ...mib);
    const line = (values: number[], max: number, cls: string) => {
      const pts = values.map(
        (v, i) => `${(W * (KEEP - values.length + i)) / KEEP},${HEIGHT - 14 - (v / max) * (HEIGHT - 24)}`,
      );
      return svg('polyline', { class: cls, points: pts.join(' ') });
    };
    const label = (x: number, y: number, text: string, anchor = 'start') => {
      const t = svg('text', { x: String(x), y: String(y), 'text-anchor': anchor });
      t.textContent = text;
      return t;
    };
    replace(
      picture,
      svg('line', { class: 'grid', x1: '0', y1: String(HEIGHT - 14), x2: String(W), y2: String(HEIGHT - 14) }),
      svg('line', { class: 'grid', x1: '0', y1: '10', x2: String(W), y2: '10' }),
      line(calls, maxCalls, 'calls'),
      line(mib, maxMib, 'mib'),
      label(2, 9, `${maxCalls.toFixed(1)} calls/s`),
      label(W - 2, 9, `${maxMib.toFixed(2)} MiB/s`, 'end'),
      label(2, HEIGHT - 2, '-5 min'),
      label(W - 2, HEIGHT - 2, 'now', 'end'),
    );
    callsNow.textContent = `calls/s ${(calls.at(-1) ?? 0).toFixed(1)}`;
    mibNow.textContent = `MiB/s ${(mib.at(-1) ?? 0).toFixed(2)}`;
  };
  void sample();
  const timer = setInterval(() => void sample(), 1000);
  signal.addEventListener('abort', () => clearInterval(timer));
  return box;
}
