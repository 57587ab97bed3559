/**
 * One call: its live display (display deltas appended as they arrive, then
 * replaced by the final display of the terminal result, as the spec says),
 * the bytes and lines of each stream, a follow mode that keeps the newest
 * output in view while the call runs, each stream's preview (its first
 * lines, read back from the artifact), the sandbox policy it ran under and
 * the model view exactly as the model receives it.
 */
import { ApiError, getJson, postJson, readEvents, Unauthorized } from './api.js';
import type { CallsModel } from './calls-model.js';
import { elapsed, statusBadge } from './calls-view.js';
import { h, replace, textWithMarkers } from './dom.js';
import { bytes, clock, count, duration } from './format.js';
import type { ReadPage, SandboxPolicy, StreamProgress, TerminalResult } from './types.js';

/** Display text the page keeps while a call runs; older text is dropped from the front (marked). */
const DISPLAY_KEEP = 1 << 20;
/** Lines of each stream's preview. */
const PREVIEW_LINES = 20;

/** The artifact URI of each published stream of `r`, with its sizes. */
export function streamUris(r: TerminalResult): Array<{ name: string; uri: string; bytes: number; lines: number }> {
  const o = r.output;
  if (!o || o.kind === 'page') return [];
  if (o.kind === 'single') return [{ name: 'output', uri: `artifact://${o.digest}`, bytes: o.bytes, lines: o.lines }];
  return o.streams.map((s) => ({
    name: s.name,
    uri: `artifact://${o.manifest}/${s.name}`,
    bytes: s.bytes,
    lines: s.lines,
  }));
}

/** The sandbox of a call in one line: mode, network, workspace and limits; `unconfined` without one. */
export function sandboxText(p: SandboxPolicy | undefined): string {
  if (!p) return 'unconfined';
  const l = p.limits ?? {};
  const limits = [
    l.memoryBytes !== undefined ? `memory ${bytes(l.memoryBytes)}` : '',
    l.cpuSeconds !== undefined ? `cpu ${count(l.cpuSeconds)} s` : '',
    l.processes !== undefined ? `processes ${count(l.processes)}` : '',
    l.fileSizeBytes !== undefined ? `file size ${bytes(l.fileSizeBytes)}` : '',
    l.openFiles !== undefined ? `open files ${count(l.openFiles)}` : '',
  ].filter((x) => x !== '');
  return [
    p.filesystem,
    `network ${p.network}`,
    `workspace ${p.workspace}`,
    limits.length > 0 ? `limits: ${limits.join(', ')}` : 'no limits',
  ].join('; ');
}

/** The pager's address for `uri` at `line`. */
export function pagerHref(uri: string, line = 0): string {
  return `#/read?uri=${encodeURIComponent(uri)}&line=${line}`;
}

/** Mounts the view of call `id` in `root`; returns its cleanup. */
export function mountCall(root: HTMLElement, id: string, model: CallsModel): () => void {
  const stop = new AbortController();
  const title = h('h1', { class: 'mono' }, id);
  const meta = h('div', { class: 'kv', attrs: { id: 'call-meta' } });
  const follow = h('input', { attrs: { type: 'checkbox', id: 'follow' } });
  follow.checked = true;
  const cancel = h('button', { attrs: { id: 'cancel' } }, 'Cancel');
  const displayKind = h('span', { class: 'muted', attrs: { id: 'display-kind' } }, 'live display');
  const displayText = document.createTextNode('');
  const display = h('pre', { class: 'box display', attrs: { id: 'display' } }, displayText);
  const streams = h('div', { attrs: { id: 'streams' } });
  const previews = h(
    'div',
    { attrs: { id: 'previews' } },
    h('span', { class: 'muted' }, 'once the output is published'),
  );
  const modelView = h('pre', { class: 'box', attrs: { id: 'model-view' } }, 'once the call has ended');
  const note = h('p', { class: 'muted', attrs: { id: 'call-note' } });
  replace(
    root,
    title,
    meta,
    h('div', { class: 'bar' }, cancel, h('label', {}, follow, ' follow (keep the newest output in view)'), note),
    h('h2', {}, 'Display ', displayKind),
    display,
    h('h2', {}, 'Streams'),
    streams,
    h('h2', {}, 'Previews'),
    previews,
    h('h2', {}, 'Model view'),
    modelView,
  );

  let result: TerminalResult | undefined;
  let progress: StreamProgress[] = [];
  let startedAt = '';
  const renderMeta = () => {
    const s = model.calls.get(id);
    const status = result?.status ?? s?.status ?? 'running';
    const complete = result ? result.complete : (s?.complete ?? null);
    const ms = result ? result.durationMs : s ? elapsed(s) : startedAt ? Date.now() - Date.parse(startedAt) : 0;
    replace(
      meta,
      h('span', { class: 'muted' }, 'status'),
      h('span', { attrs: { id: 'call-status' } }, statusBadge({ status, complete })),
      h('span', { class: 'muted' }, 'tool'),
      h('span', { class: 'mono' }, result?.tool ?? s?.tool ?? ''),
      h('span', { class: 'muted' }, 'session'),
      h('span', { class: 'mono' }, result?.session ?? s?.session ?? ''),
      h('span', { class: 'muted' }, 'started'),
      h('span', {}, clock(result?.startedAt ?? s?.startedAt ?? startedAt)),
      h('span', { class: 'muted' }, 'elapsed'),
      h('span', {}, duration(ms)),
      // Known once the result is: a running call's policy is not in its events.
      result ? h('span', { class: 'muted' }, 'sandbox') : null,
      result ? h('span', { class: 'mono', attrs: { id: 'call-sandbox' } }, sandboxText(result.sandbox)) : null,
      result?.error ? h('span', { class: 'muted' }, 'error') : null,
      result?.error ? h('span', { class: 'error' }, `${result.error.code}: ${result.error.message}`) : null,
    );
    cancel.hidden = status !== 'running';
    const list: Array<StreamProgress & { uri?: string }> = result ? streamUris(result) : (s?.streams ?? progress);
    replace(
      streams,
      list.length === 0 ? h('span', { class: 'muted' }, 'no output yet') : null,
      ...list.map((x) =>
        h(
          'div',
          { class: 'mono', attrs: { 'data-stream': x.name } },
          `${x.name}: ${bytes(x.bytes)}, ${count(x.lines)} lines `,
          x.uri !== undefined ? h('a', { attrs: { href: pagerHref(x.uri) } }, 'open in pager') : null,
        ),
      ),
    );
  };
  const appendDisplay = (text: string) => {
    displayText.appendData(text);
    if (displayText.length > DISPLAY_KEEP) {
      displayText.deleteData(0, displayText.length - DISPLAY_KEEP);
      note.textContent = 'earlier display text dropped from the page (the output is whole in its artifacts)';
    }
    if (follow.checked) display.scrollTop = display.scrollHeight;
  };
  const finish = (r: TerminalResult) => {
    result = r;
    // The final display replaces the live one: it is what the call's result says.
    displayText.data = r.display;
    displayKind.textContent = 'final display';
    modelView.textContent = r.model;
    if (follow.checked) display.scrollTop = display.scrollHeight;
    renderMeta();
    void renderPreviews(r);
  };
  const renderPreviews = async (r: TerminalResult) => {
    const uris = streamUris(r);
    replace(previews, uris.length === 0 ? h('span', { class: 'muted' }, 'no stored output') : null);
    for (const u of uris) {
      const body = h('pre', { class: 'box' }, '…');
      previews.appendChild(
        h(
          'div',
          { attrs: { 'data-preview': u.name } },
          h('strong', {}, u.name),
          ' ',
          h('a', { attrs: { href: pagerHref(u.uri) } }, 'open in pager'),
          body,
        ),
      );
      try {
        const q = new URLSearchParams({ filePath: u.uri, limit: String(PREVIEW_LINES) });
        const page = await getJson<ReadPage>(`/v1/read?${q}`, stop.signal);
        const more = page.totalLines > page.lines ? `\n… ${count(page.totalLines - page.lines)} more lines` : '';
        replace(body, ...textWithMarkers(page.content, page.lossy), h('span', { class: 'muted' }, more));
      } catch (err) {
        replace(body, h('span', { class: 'error' }, (err as Error).message));
      }
    }
  };
  cancel.addEventListener('click', () => {
    void postJson(`/v1/calls/${encodeURIComponent(id)}/cancel`, { reason: 'cancelled from the web view' }).catch(
      () => {},
    );
  });
  const follower = async () => {
    let last = 0;
    while (!stop.signal.aborted && !result) {
      try {
        const q = last > 0 ? `&lastEventId=${last}` : '';
        await readEvents(
          `/v1/calls/${encodeURIComponent(id)}/events?progress=true${q}`,
          (e) => {
            if (e.id) last = Number(e.id);
            const data = JSON.parse(e.data) as Record<string, unknown>;
            if (e.event === 'started') startedAt = String(data.at);
            else if (e.event === 'display') appendDisplay(String(data.text));
            else if (e.event === 'progress') progress = data.streams as StreamProgress[];
            else if (e.event === 'lagged')
              note.textContent = `${data.dropped} live events missed (the final display has everything)`;
            else if (e.event === 'completed') finish(data.result as TerminalResult);
            if (e.event !== 'display') renderMeta();
          },
          stop.signal,
        );
      } catch (err) {
        if (err instanceof Unauthorized) return;
        if (err instanceof ApiError && err.status === 404) {
          note.textContent =
            'this server does not know this call (unknown, or no longer kept): see Sessions for recorded calls';
          return;
        }
      }
      if (!result && !stop.signal.aborted) await new Promise((r) => setTimeout(r, 1000));
    }
  };
  void follower();
  renderMeta();
  const unsubscribe = model.subscribe(() => {
    if (!result) renderMeta();
  });
  const tick = setInterval(() => {
    if (!result) renderMeta();
  }, 1000);
  return () => {
    stop.abort();
    unsubscribe();
    clearInterval(tick);
  };
}
