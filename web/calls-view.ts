/**
 * The calls, live: a filter bar (status, tool, session) and a virtualised
 * list that only ever holds the rows in view, so thousands of calls cost
 * what forty do.
 */
import type { CallsModel } from './calls-model.js';
import { type Child, h, navigate, replace } from './dom.js';
import { bytes, count, duration } from './format.js';
import type { CallSummary } from './types.js';

/** Height of one row in pixels (app.css `.row`). */
const ROW = 24;
/** Rows drawn beyond the visible ones on each side. */
const OVERSCAN = 8;

/** What a status filter value keeps. */
function keeps(filter: string, c: CallSummary): boolean {
  if (filter === '') return true;
  if (filter === 'incomplete') return c.complete === false;
  return c.status === filter;
}

/** The elapsed time of a call: its duration once ended, time since it started while it runs. */
export function elapsed(c: CallSummary): number {
  return c.durationMs ?? Math.max(0, Date.now() - Date.parse(c.startedAt));
}

/** A call's status with its incomplete mark. */
export function statusBadge(c: { status: string; complete: boolean | null }): HTMLElement {
  return h(
    'span',
    { class: `status ${c.status}` },
    c.status,
    c.complete === false
      ? h('span', { class: 'incomplete', attrs: { title: 'ended without all its output' } }, 'incomplete')
      : null,
  );
}

/** `stdout 12 KiB / 300 lines · stderr 0 B / 0 lines`. */
export function streamsText(c: CallSummary): string {
  return c.streams.map((s) => `${s.name} ${bytes(s.bytes)} / ${count(s.lines)} lines`).join(' · ');
}

/** Mounts the calls view in `root`; returns its cleanup. */
export function mountCalls(root: HTMLElement, model: CallsModel, chart: Node): () => void {
  const status = h(
    'select',
    { attrs: { 'aria-label': 'status', id: 'filter-status' } },
    ...['', 'running', 'success', 'failed', 'cancelled', 'incomplete'].map((v) =>
      h('option', { attrs: { value: v } }, v === '' ? 'any status' : v),
    ),
  );
  const tool = h('select', { attrs: { 'aria-label': 'tool', id: 'filter-tool' } });
  const session = h('input', { attrs: { placeholder: 'session', 'aria-label': 'session', id: 'filter-session' } });
  const shown = h('span', { class: 'muted', attrs: { id: 'calls-count' } });
  const spacer = h('div', { class: 'spacer' });
  const list = h('div', { class: 'vlist', attrs: { id: 'calls-list' } }, spacer);
  const header = h(
    'div',
    { class: 'row head' },
    ...['status', 'tool', 'session', 'elapsed', 'streams', 'call'].map((t) => h('span', {}, t)),
  );
  replace(root, chart, h('div', { class: 'bar' }, status, tool, session, shown), header, list);

  let rows: CallSummary[] = [];
  let knownTools = 0;
  const filter = () => {
    const s = status.value;
    const t = tool.value;
    const sess = session.value.trim();
    rows = [];
    for (const c of model.calls.values()) {
      if (keeps(s, c) && (t === '' || c.tool === t) && (sess === '' || (c.session ?? '').includes(sess))) rows.push(c);
    }
    // Newest first: what is happening now is at the top.
    rows.reverse();
    shown.textContent = `${count(rows.length)} of ${count(model.calls.size)} calls`;
    spacer.style.height = `${rows.length * ROW}px`;
  };
  const syncTools = () => {
    if (model.tools.size === knownTools) return;
    knownTools = model.tools.size;
    const chosen = tool.value;
    replace(
      tool,
      h('option', { attrs: { value: '' } }, 'any tool'),
      ...[...model.tools].sort().map((t) => h('option', { attrs: { value: t } }, t)),
    );
    tool.value = chosen;
  };
  const draw = () => {
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - OVERSCAN);
    const last = Math.min(rows.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + OVERSCAN);
    const children: Child[] = [];
    for (let i = first; i < last; i++) children.push(row(rows[i] as CallSummary, i));
    replace(spacer, ...children);
  };
  const refresh = () => {
    syncTools();
    filter();
    draw();
  };
  let frame = 0;
  const onScroll = () => {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      draw();
    });
  };
  list.addEventListener('scroll', onScroll);
  for (const el of [status, tool]) el.addEventListener('change', refresh);
  session.addEventListener('input', refresh);
  const unsubscribe = model.subscribe(refresh);
  // Running calls' elapsed times move on their own.
  const tick = setInterval(draw, 1000);
  refresh();
  return () => {
    unsubscribe();
    clearInterval(tick);
    if (frame) cancelAnimationFrame(frame);
  };
}

function row(c: CallSummary, i: number): HTMLElement {
  const el = h(
    'div',
    {
      class: 'row',
      attrs: { 'data-call-id': c.callId, 'data-index': String(i), role: 'link' },
      on: { click: () => navigate(`#/call/${encodeURIComponent(c.callId)}`) },
    },
    statusBadge(c),
    h('span', { class: 'mono' }, c.tool),
    h('span', { class: 'mono' }, c.session ?? ''),
    h('span', {}, duration(elapsed(c))),
    h('span', { class: 'muted' }, streamsText(c)),
    h('span', { class: 'mono muted' }, c.callId.slice(0, 8)),
  );
  el.style.transform = `translateY(${i * ROW}px)`;
  return el;
}
