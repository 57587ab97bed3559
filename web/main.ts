/**
 * The web view of `sluice serve` (docs/web.md). The token comes from the
 * address's fragment (`#token=…`, which browsers never send to the server)
 * or this tab's session storage, is removed from the address at once, and
 * goes only into the Authorization header of API requests. Without a token
 * that the server accepts, the page shows the prompt and nothing else.
 */
import { getJson, onUnauthorized, setToken, storedToken, Unauthorized } from './api.js';
import { mountCall } from './call-view.js';
import { CallsModel } from './calls-model.js';
import { mountCalls } from './calls-view.js';
import { chart } from './chart.js';
import { h, replace } from './dom.js';
import { mountPager } from './pager-view.js';
import { mountReplay, mountSessions } from './sessions-view.js';
import { mountStore } from './store-view.js';

const main = document.getElementById('main') as HTMLElement;
const nav = document.getElementById('nav') as HTMLElement;
const conn = document.getElementById('conn') as HTMLElement;
const login = document.getElementById('login') as HTMLFormElement;
const tokenInput = document.getElementById('token') as HTMLInputElement;
const loginError = document.getElementById('login-error') as HTMLElement;

let session: { model: CallsModel; chart: HTMLElement; stop: AbortController } | undefined;
let unmount: (() => void) | undefined;

/** `decodeURIComponent`, or undefined for a malformed escape (an address is whatever someone typed or linked). */
function decoded(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/** Takes `#token=…` out of the address (into storage); returns it ('' when malformed: the prompt then shows). */
function tokenFromAddress(): string | undefined {
  const m = /^#token=([^&]*)/.exec(location.hash);
  if (!m) return undefined;
  history.replaceState(null, '', `${location.pathname}#/calls`);
  return decoded(m[1] ?? '') ?? '';
}

function showLogin(message?: string): void {
  unmount?.();
  unmount = undefined;
  session?.model.close();
  session?.stop.abort();
  session = undefined;
  replace(main);
  nav.hidden = true;
  conn.textContent = '';
  login.hidden = false;
  loginError.hidden = message === undefined;
  loginError.textContent = message ?? '';
  tokenInput.value = '';
  tokenInput.focus();
}

async function open(token: string): Promise<void> {
  setToken(token);
  try {
    await getJson('/v1/info');
  } catch (err) {
    showLogin(
      err instanceof Unauthorized
        ? 'The server refused this token.'
        : `Cannot reach the server: ${(err as Error).message}`,
    );
    return;
  }
  login.hidden = true;
  nav.hidden = false;
  const stop = new AbortController();
  const model = new CallsModel();
  model.onConnection((c) => {
    conn.textContent = c ? '● live' : '○ reconnecting';
  });
  session = { model, chart: chart(model, stop.signal), stop };
  void model.run();
  route();
}

function route(): void {
  if (!session) return;
  unmount?.();
  const hash = location.hash || '#/calls';
  const [path, query] = hash.slice(1).split('?', 2) as [string, string | undefined];
  for (const a of nav.querySelectorAll('a')) {
    a.classList.toggle('active', path.startsWith(a.getAttribute('href')?.slice(1) ?? '\0'));
  }
  const parts = path.split('/').filter(Boolean);
  const [view, arg] = [parts[0] ?? 'calls', parts[1] === undefined ? undefined : decoded(parts[1])];
  if (parts[1] !== undefined && arg === undefined) {
    unmount = undefined;
    replace(main, h('p', { class: 'error', attrs: { id: 'bad-address' } }, `This address is malformed: ${hash}`));
  } else if (view === 'call' && arg) unmount = mountCall(main, arg, session.model);
  else if (view === 'read') unmount = mountPager(main, new URLSearchParams(query ?? ''));
  else if (view === 'sessions') unmount = mountSessions(main);
  else if (view === 'session' && arg) unmount = mountReplay(main, arg);
  else if (view === 'store') unmount = mountStore(main);
  else unmount = mountCalls(main, session.model, session.chart);
}

login.addEventListener('submit', (e) => {
  e.preventDefault();
  void open(tokenInput.value.trim());
});
window.addEventListener('hashchange', () => {
  const t = tokenFromAddress();
  if (t !== undefined) void open(t);
  else route();
});
onUnauthorized(() => showLogin('The server refused the token.'));

const initial = tokenFromAddress() ?? storedToken();
if (initial) void open(initial);
else showLogin();
