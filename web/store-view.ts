/**
 * The store: blobs and bytes (`GET /v1/store`, a walk at most every few
 * seconds), the last collection and verification this server ran, and
 * buttons to run them (`POST /v1/gc`, `POST /v1/verify`).
 */
import { getJson, postJson } from './api.js';
import { type Child, h, replace } from './dom.js';
import { bytes, clock, count } from './format.js';
import type { StoreInfo } from './types.js';

function report(r: Record<string, unknown>): HTMLElement {
  const cells: Child[] = [];
  for (const [k, v] of Object.entries(r)) {
    cells.push(h('span', { class: 'muted' }, k));
    const text = Array.isArray(v)
      ? v.length === 0
        ? '—'
        : v.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))).join('\n')
      : String(v);
    cells.push(h('span', { class: 'mono', attrs: { 'data-field': k } }, text));
  }
  return h('div', { class: 'kv box' }, ...cells);
}

/** Mounts the store view in `root`. */
export function mountStore(root: HTMLElement): () => void {
  const stop = new AbortController();
  const summary = h('div', { class: 'kv', attrs: { id: 'store-summary' } });
  const gc = h('div', { attrs: { id: 'last-gc' } });
  const verify = h('div', { attrs: { id: 'last-verify' } });
  const dryRun = h('input', { attrs: { type: 'checkbox', id: 'dry-run' } });
  dryRun.checked = true;
  const runGc = h('button', { attrs: { id: 'run-gc' } }, 'Collect garbage');
  const runVerify = h('button', { attrs: { id: 'run-verify' } }, 'Verify');
  const status = h('span', { class: 'muted', attrs: { id: 'store-status' } });
  replace(
    root,
    h('h1', {}, 'Store'),
    summary,
    h('div', { class: 'bar' }, runGc, h('label', {}, dryRun, ' dry run'), runVerify, status),
    h('h2', {}, 'Last garbage collection'),
    gc,
    h('h2', {}, 'Last verification'),
    verify,
  );
  const load = async () => {
    try {
      const s = await getJson<StoreInfo>('/v1/store', stop.signal);
      replace(
        summary,
        h('span', { class: 'muted' }, 'root'),
        h('span', { class: 'mono' }, s.root),
        h('span', { class: 'muted' }, 'blobs'),
        h('span', { attrs: { id: 'store-blobs' } }, count(s.blobs)),
        h('span', { class: 'muted' }, 'bytes'),
        h('span', { attrs: { id: 'store-bytes' } }, `${bytes(s.bytes)} (${count(s.bytes)} B)`),
        h('span', { class: 'muted' }, 'counted'),
        h('span', {}, clock(s.walkedAt)),
      );
      replace(
        gc,
        s.lastGc ? h('p', {}, `at ${clock(s.lastGc.at)}`) : h('p', { class: 'muted' }, 'none run by this server yet'),
        s.lastGc ? report(s.lastGc.report) : null,
      );
      replace(
        verify,
        s.lastVerify
          ? h('p', {}, `at ${clock(s.lastVerify.at)}`)
          : h('p', { class: 'muted' }, 'none run by this server yet'),
        s.lastVerify ? report(s.lastVerify.report) : null,
      );
    } catch (err) {
      status.textContent = (err as Error).message;
    }
  };
  const run = async (button: HTMLButtonElement, path: string, body: unknown) => {
    button.disabled = true;
    status.textContent = 'running…';
    try {
      await postJson(path, body);
      status.textContent = 'done';
    } catch (err) {
      status.textContent = (err as Error).message;
    } finally {
      button.disabled = false;
    }
    await load();
  };
  runGc.addEventListener('click', () => void run(runGc, '/v1/gc', { dryRun: dryRun.checked }));
  runVerify.addEventListener('click', () => void run(runVerify, '/v1/verify', {}));
  void load();
  return () => stop.abort();
}
