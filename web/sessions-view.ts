/**
 * Sessions: the list (`GET /v1/sessions`), one session's calls replayed from
 * its event log (`GET /v1/sessions/:id/replay`, nothing is run), and revert
 * to before a call (`POST /v1/sessions/:id/revert`), asked twice on the page
 * rather than through a dialog.
 */
import { getJson, postJson } from './api.js';
import { pagerHref, streamUris } from './call-view.js';
import { statusBadge } from './calls-view.js';
import { h, navigate, replace } from './dom.js';
import { bytes, clock, count, duration } from './format.js';
import type { ReplayedSession, SessionSummary } from './types.js';

/** Mounts the session list in `root`. */
export function mountSessions(root: HTMLElement): () => void {
  const stop = new AbortController();
  const table = h('table', { attrs: { id: 'sessions' } });
  replace(root, h('h1', {}, 'Sessions'), table);
  void (async () => {
    try {
      const { sessions } = await getJson<{ sessions: SessionSummary[] }>('/v1/sessions', stop.signal);
      replace(
        table,
        h(
          'tr',
          {},
          ...['session', 'calls', 'reverted', 'interrupted', 'log', 'referenced', 'updated'].map((t) => h('th', {}, t)),
        ),
        ...sessions.map((s) =>
          h(
            'tr',
            {
              class: 'click',
              attrs: { 'data-session': s.id },
              on: { click: () => navigate(`#/session/${encodeURIComponent(s.id)}`) },
            },
            h('td', { class: 'mono' }, s.id),
            h('td', {}, count(s.calls)),
            h('td', {}, count(s.reverted)),
            h('td', {}, count(s.interrupted)),
            h('td', {}, bytes(s.bytes)),
            h('td', {}, bytes(s.referencedBytes)),
            h('td', {}, clock(s.updatedAt)),
          ),
        ),
      );
      if (sessions.length === 0) table.appendChild(h('tr', {}, h('td', { class: 'muted' }, 'no sessions yet')));
    } catch (err) {
      replace(table, h('tr', {}, h('td', { class: 'error' }, (err as Error).message)));
    }
  })();
  return () => stop.abort();
}

/** Mounts the replay of session `id` in `root`. */
export function mountReplay(root: HTMLElement, id: string): () => void {
  const stop = new AbortController();
  const info = h('p', { class: 'muted', attrs: { id: 'replay-info' } });
  const table = h('table', { attrs: { id: 'replay' } });
  replace(root, h('h1', { class: 'mono' }, `Session ${id}`), info, table);
  const load = async () => {
    try {
      const r = await getJson<ReplayedSession>(`/v1/sessions/${encodeURIComponent(id)}/replay`, stop.signal);
      info.textContent = `${count(r.calls.length)} live calls, ${count(r.reverted)} reverted, ${count(r.corruptLines)} corrupt log lines (replayed from the event log; nothing runs)`;
      replace(
        table,
        h('tr', {}, ...['#', 'status', 'tool', 'args', 'elapsed', 'output', ''].map((t) => h('th', {}, t))),
        ...r.calls.map((c, i) => {
          const revert = h('button', { attrs: { 'data-revert': c.callId } }, 'Revert to before this call');
          let armed = false;
          revert.addEventListener('click', async () => {
            if (!armed) {
              armed = true;
              revert.textContent = `Confirm: hide this call and the ${r.calls.length - i - 1} after it`;
              return;
            }
            revert.disabled = true;
            try {
              const done = await postJson<{ reverted: string[] }>(`/v1/sessions/${encodeURIComponent(id)}/revert`, {
                beforeCallId: c.callId,
              });
              info.textContent = `reverted ${done.reverted.length} calls`;
              await load();
            } catch (err) {
              revert.textContent = (err as Error).message;
            }
          });
          const args = JSON.stringify(c.args);
          return h(
            'tr',
            { attrs: { 'data-call': c.callId } },
            h('td', {}, String(i)),
            h(
              'td',
              {},
              statusBadge({ status: c.result.status, complete: c.result.complete }),
              c.interrupted ? ' interrupted' : '',
            ),
            h('td', { class: 'mono' }, c.tool),
            h('td', { class: 'mono' }, args.length > 160 ? `${args.slice(0, 160)}…` : args),
            h('td', {}, duration(c.result.durationMs)),
            h(
              'td',
              {},
              ...streamUris(c.result).map((u) =>
                h('a', { attrs: { href: pagerHref(u.uri) } }, `${u.name} (${bytes(u.bytes)}) `),
              ),
            ),
            h('td', {}, revert),
          );
        }),
      );
    } catch (err) {
      info.textContent = (err as Error).message;
    }
  };
  void load();
  return () => stop.abort();
}
