/**
 * The artifact pager: any `artifact://` URI, a page of lines at a time with
 * their zero-based numbers (the `offset` the read tool takes), a jump to any
 * line (one `GET /v1/read` at that offset: the store's line index makes it
 * cost a page, whatever the artifact's size), a line longer than a page
 * continued by its `nextByteOffset`, bytes that are not UTF-8 shown as
 * U+FFFD with a marker, and search whose results jump to their lines.
 */
import { getJson } from './api.js';
import { type Child, h, replace, textWithMarkers } from './dom.js';
import { count } from './format.js';
import type { ReadPage, SearchResult } from './types.js';

/** Lines per page. */
const PAGE = 200;

/** Where the pager is: the line and, inside it, the byte a continued line resumes at. */
interface Position {
  offset: number;
  byteOffset: number;
}

/** Mounts the pager on `params` (`uri`, `line`) in `root`; returns its cleanup. */
export function mountPager(root: HTMLElement, params: URLSearchParams): () => void {
  const stop = new AbortController();
  const uri = h('input', {
    class: 'mono',
    attrs: { id: 'uri', size: '90', placeholder: 'artifact://<digest>[/<stream>]', 'aria-label': 'artifact URI' },
  });
  uri.value = params.get('uri') ?? '';
  const line = h('input', { attrs: { id: 'line', type: 'number', min: '0', 'aria-label': 'line', size: '10' } });
  const go = h('button', { attrs: { id: 'go' } }, 'Go to line');
  const prev = h('button', { attrs: { id: 'prev' } }, '◀ Previous');
  const next = h('button', { attrs: { id: 'next' } }, 'Next ▶');
  const where = h('span', { class: 'muted', attrs: { id: 'where' } });
  const lossy = h('p', { class: 'muted', attrs: { id: 'lossy' } });
  lossy.hidden = true;
  const body = h('div', { class: 'pager', attrs: { id: 'page' } });
  const pattern = h('input', { attrs: { id: 'pattern', placeholder: 'search', 'aria-label': 'search pattern' } });
  const regex = h('input', { attrs: { type: 'checkbox', id: 'regex' } });
  const ignoreCase = h('input', { attrs: { type: 'checkbox', id: 'ignore-case' } });
  const find = h('button', { attrs: { id: 'find' } }, 'Search');
  const summary = h('div', { class: 'muted', attrs: { id: 'search-summary' } });
  const results = h('div', { class: 'results', attrs: { id: 'results' } });
  const error = h('p', { class: 'error', attrs: { id: 'pager-error' } });
  replace(
    root,
    h('div', { class: 'bar' }, uri, line, go),
    h('div', { class: 'bar' }, prev, next, where),
    error,
    lossy,
    h(
      'div',
      { class: 'split' },
      body,
      h(
        'div',
        {},
        h('div', { class: 'bar' }, pattern, find),
        h('div', { class: 'bar' }, h('label', {}, regex, ' regex'), h('label', {}, ignoreCase, ' ignore case')),
        summary,
        results,
      ),
    ),
  );

  let page: ReadPage | undefined;
  let at: Position = { offset: Number(params.get('line') ?? 0) || 0, byteOffset: 0 };
  let target: number | undefined = params.has('line') ? at.offset : undefined;
  /** Pages back: where each earlier page started (a continued line has several). */
  const earlier: Position[] = [];

  const load = async (pos: Position, remember = true) => {
    if (!uri.value.trim()) return;
    error.textContent = '';
    try {
      const q = new URLSearchParams({ filePath: uri.value.trim(), offset: String(pos.offset), limit: String(PAGE) });
      if (pos.byteOffset > 0) q.set('byteOffset', String(pos.byteOffset));
      const p = await getJson<ReadPage>(`/v1/read?${q}`, stop.signal);
      if (remember && page) earlier.push(at);
      page = p;
      at = pos;
      render(p, pos);
    } catch (err) {
      error.textContent = (err as Error).message;
    }
  };
  const render = (p: ReadPage, pos: Position) => {
    const text = p.content.endsWith('\n') ? p.content.slice(0, -1) : p.content;
    const lines = p.lines === 0 ? [] : text.split('\n');
    const cutAtEnd = p.nextByteOffset !== null;
    const rows: Child[] = lines.map((t, i) => {
      const n = p.offset + i;
      const first = i === 0 && pos.byteOffset > 0;
      const last = i === lines.length - 1 && cutAtEnd;
      return h(
        'div',
        { class: n === target ? 'line target' : 'line', attrs: { 'data-line': String(n) } },
        h('span', { class: 'ln' }, String(n)),
        h(
          'span',
          { class: 'tx' },
          first ? h('span', { class: 'cont' }, `⤷ line ${n} from byte ${pos.byteOffset}: `) : null,
          ...textWithMarkers(t, p.lossy),
          last ? h('span', { class: 'cont' }, ` ⤶ continues at byte ${p.nextByteOffset} (Next)`) : null,
        ),
      );
    });
    replace(body, ...rows);
    body.setAttribute('data-at', `${pos.offset}:${pos.byteOffset}`);
    const end = p.lines === 0 ? p.offset : p.offset + p.lines - 1;
    where.textContent =
      p.totalLines === 0
        ? 'empty artifact'
        : `lines ${count(p.offset)}–${count(end)} of ${count(p.totalLines)} (zero-based)`;
    lossy.hidden = !p.lossy;
    lossy.textContent = p.lossy ? 'This page holds bytes that are not valid UTF-8: each shows as a marked \uFFFD.' : '';
    prev.disabled = p.offset === 0 && pos.byteOffset === 0;
    next.disabled = p.nextOffset === null;
    line.value = String(p.offset);
    const t = target === undefined ? undefined : body.querySelector(`[data-line="${target}"]`);
    if (t) t.scrollIntoView({ block: 'center' });
    else body.scrollTop = 0;
  };
  const jump = (n: number) => {
    target = n;
    earlier.length = 0;
    const q = new URLSearchParams({ uri: uri.value.trim(), line: String(n) });
    // Keep the address shareable without reloading the view.
    window.history.replaceState(null, '', `#/read?${q}`);
    void load({ offset: n, byteOffset: 0 }, false);
  };
  go.addEventListener('click', () => jump(Math.max(0, Math.floor(Number(line.value) || 0))));
  line.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') go.click();
  });
  uri.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') jump(0);
  });
  next.addEventListener('click', () => {
    if (!page || page.nextOffset === null) return;
    target = undefined;
    void load({ offset: page.nextOffset, byteOffset: page.nextByteOffset ?? 0 });
  });
  prev.addEventListener('click', () => {
    target = undefined;
    const back = earlier.pop();
    void load(back ?? { offset: Math.max(0, at.offset - PAGE), byteOffset: 0 }, false);
  });

  let searchFrom: number | null = 0;
  const search = async (more: boolean) => {
    const p = pattern.value;
    if (!p || !uri.value.trim()) return;
    if (!more) {
      searchFrom = 0;
      replace(results);
    }
    if (searchFrom === null) return;
    const q = new URLSearchParams({ filePath: uri.value.trim(), pattern: p, offset: String(searchFrom), limit: '100' });
    if (regex.checked) q.set('regex', 'true');
    if (ignoreCase.checked) q.set('ignoreCase', 'true');
    try {
      const r = await getJson<SearchResult>(`/v1/search?${q}`, stop.signal);
      results.querySelector('.more')?.remove();
      for (const l of r.lines) {
        if (!l.match) continue;
        results.appendChild(
          h(
            'div',
            { class: 'hit line', attrs: { 'data-hit': String(l.line) }, on: { click: () => jump(l.line) } },
            h('span', { class: 'ln' }, String(l.line)),
            h('span', { class: 'tx' }, ...textWithMarkers(l.text), l.cut ? h('span', { class: 'cont' }, ' …') : null),
          ),
        );
      }
      searchFrom = r.nextOffset;
      const shown = results.querySelectorAll('[data-hit]').length;
      summary.textContent = `${count(shown)} matching lines${r.nextOffset === null ? '' : ' so far'}`;
      if (r.nextOffset !== null) {
        results.appendChild(h('button', { class: 'more', on: { click: () => void search(true) } }, 'More results'));
      }
    } catch (err) {
      summary.textContent = (err as Error).message;
    }
  };
  find.addEventListener('click', () => void search(false));
  pattern.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') void search(false);
  });

  void load(at, false);
  return () => stop.abort();
}
