/**
 * The web view in a real headless Chromium against a real server on
 * loopback, with real calls through the HTTP API: the token, the live calls
 * list, one call followed while it runs, and the security rules (tool output
 * as text, nothing run, no data without the token).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sandboxSupport } from '../../workers/sandbox/support.js';
import { cleanup, spawnServe, startTestServer, type TestServer, tempDir } from '../server/helpers.js';
import { chromiumBrowser, useBrowser } from '../support/browser.js';
import {
  expectNoLeaks,
  foreignRequests,
  openView,
  type PageElement,
  type PageGlobals,
  runCall,
  screenshot,
  streamUri,
  type WatchedPage,
  watchedPage,
} from './harness.js';

// Inside page.evaluate and waitForFunction: the browser's globals.
declare const document: PageGlobals['document'];
declare const location: PageGlobals['location'];
declare const sessionStorage: PageGlobals['sessionStorage'];

const chromium = await chromiumBrowser();

describe.runIf(chromium)('the web view (headless Chromium)', () => {
  const browser = useBrowser(() => chromium!);
  let shots: string;
  let w: WatchedPage | undefined;
  beforeAll(async () => {
    shots = await tempDir('sluice-web-shots-');
  });
  afterEach(async () => {
    await w?.page.close();
    w = undefined;
    await cleanup();
  });
  afterAll(cleanup);

  it('opens with the token from the address, forgets it from the address, and shows calls appear and end live', async () => {
    const s = await startTestServer();
    w = await watchedPage(browser());
    await openView(w, s);
    const { page } = w;
    expect(await page.evaluate(() => location.hash)).toBe('#/calls');
    expect(await page.evaluate(() => sessionStorage.getItem('sluice.token'))).toBe(s.token);
    await page.waitForSelector('#conn:text("live")');
    const ok = await s.start('bash', { command: 'seq 1 3' }, { session: 'demo' });
    const failing = await s.start('bash', { command: 'echo oops >&2; exit 3' }, { session: 'demo' });
    const slow = await s.start('bash', { command: 'echo waiting; exec sleep 60' }, { session: 'other' });
    await page.waitForSelector(`.row[data-call-id="${ok}"] .status.success`);
    await page.waitForSelector(`.row[data-call-id="${failing}"] .status.failed`);
    await page.waitForSelector(`.row[data-call-id="${slow}"] .status.running`);
    expect(await page.textContent(`.row[data-call-id="${ok}"]`)).toContain('stdout 6 B / 3 lines');
    expect(await page.textContent('#calls-count')).toBe('3 of 3 calls');
    // Filters: by status, by session.
    await page.selectOption('#filter-status', 'running');
    expect(await page.textContent('#calls-count')).toBe('1 of 3 calls');
    await page.selectOption('#filter-status', '');
    await page.fill('#filter-session', 'demo');
    expect(await page.textContent('#calls-count')).toBe('2 of 3 calls');
    await page.fill('#filter-session', '');
    await page.waitForSelector('#rate-calls');
    await screenshot(page, shots, 'calls');
    // The running one is cancelled through the API: the row turns cancelled and incomplete.
    expect((await s.api(`/v1/calls/${slow}/cancel`, { method: 'POST' })).status).toBe(202);
    await page.waitForSelector(`.row[data-call-id="${slow}"] .status.cancelled .incomplete`);
    expect(w.errors).toEqual([]);
    expect(w.dialogs).toEqual([]);
    expect(foreignRequests(w, s)).toEqual([]);
    await expectNoLeaks(s);
  });

  it('charts calls per second and captured MiB per second as calls run', async () => {
    const s = await startTestServer();
    w = await watchedPage(browser());
    const { page } = w;
    await openView(w, s);
    // Two samples first, so the calls below fall between samples the chart already has.
    await page.waitForFunction(
      () => (document.querySelector('#chart polyline.calls')?.getAttribute('points') ?? '') !== '',
    );
    const ids = await Promise.all(
      Array.from({ length: 8 }, () => s.start('bash', { command: 'head -c 1048576 /dev/zero' }, { session: 'chart' })),
    );
    for (const id of ids) expect((await s.api(`/v1/calls/${id}?wait=60`)).status).toBe(200);
    // A point above the baseline (y 96 in a 110-high chart) on each line: calls/s and MiB/s rose.
    const risen = (cls: string) =>
      page.waitForFunction((c) => {
        const points = document.querySelector(`#chart polyline.${c}`)?.getAttribute('points') ?? '';
        return points.split(' ').some((p) => Number(p.split(',')[1]) < 95);
      }, cls);
    await risen('calls');
    await risen('mib');
    await screenshot(page, shots, 'chart');
    expect(w.errors).toEqual([]);
    await expectNoLeaks(s);
  });

  it('opens from the address a real sluice serve prints, the token in the fragment only', async () => {
    const dir = await tempDir('sluice-web-serve-');
    const serve = await spawnServe(['--store', `${dir}/store`]);
    try {
      const m = /web view: (http:\/\/\S+\/#token=([0-9a-f]{64}))\n/.exec(serve.stdout());
      expect(m?.[1]).toBe(`${serve.url}/#token=${m?.[2]}`);
      w = await watchedPage(browser());
      const { page } = w;
      await page.goto(m?.[1] as string);
      await page.waitForSelector('#conn:text("live")');
      expect(await page.evaluate(() => location.hash)).toBe('#/calls');
      // The token went only into headers: no URL the page requested carries it.
      expect(w.requests.filter((u) => u.includes(m?.[2] as string))).toEqual([]);
      expect(w.requests.some((u) => new URL(u).pathname === '/v1/events')).toBe(true);
      expect(w.errors).toEqual([]);
    } finally {
      serve.child.kill('SIGINT');
      expect(await serve.exited).toBe(0);
    }
  });

  it('follows a running call: the live display grows in view, then the final display and model view replace it', async () => {
    const s = await startTestServer();
    w = await watchedPage(browser());
    const { page } = w;
    const id = await s.start('bash', { command: 'for i in $(seq 1 300); do echo "line $i"; done; exec sleep 60' });
    await openView(w, s, `#/call/${id}`);
    await page.waitForFunction(() => document.getElementById('display')?.textContent?.includes('line 300'));
    expect(await page.textContent('#display-kind')).toBe('live display');
    expect(await page.isChecked('#follow')).toBe(true);
    // Follow keeps the newest line in view: the display is scrolled to its end.
    await page.waitForFunction(() => {
      const d = document.getElementById('display') as PageElement;
      return d.scrollHeight > d.clientHeight && d.scrollTop + d.clientHeight >= d.scrollHeight - 2;
    });
    expect(await page.textContent('#call-status')).toContain('running');
    await page.waitForSelector('[data-stream="stdout"]');
    await screenshot(page, shots, 'call');
    await page.click('#cancel');
    await page.waitForFunction(() => document.getElementById('display-kind')?.textContent === 'final display');
    const result = (await (await s.api(`/v1/calls/${id}`)).json()) as {
      display: string;
      model: string;
      status: string;
    };
    expect(result.status).toBe('cancelled');
    expect(await page.textContent('#display')).toBe(result.display);
    expect(await page.textContent('#model-view')).toBe(result.model);
    expect(await page.textContent('#call-status')).toContain('cancelledincomplete');
    expect(await page.textContent('#call-sandbox')).toBe('unconfined');
    await page.waitForFunction(() =>
      document.querySelector('[data-preview="stdout"] pre')?.textContent?.startsWith('line 1\nline 2\n'),
    );
    expect(await page.textContent('[data-preview="stdout"] pre')).toContain('… 280 more lines');
    expect(w.errors).toEqual([]);
    await expectNoLeaks(s);
  });

  it.runIf(sandboxSupport().available)(
    'shows the sandbox a call ran under: mode, network, workspace, limits',
    async () => {
      const s = await startTestServer([], {}, { sandbox: { limits: { cpuSeconds: 30, fileSizeBytes: 1024 * 1024 } } });
      const { callId, result } = await runCall(s, 'bash', { command: 'echo in' });
      w = await watchedPage(browser());
      const { page } = w;
      await openView(w, s, `#/call/${callId}`);
      await page.waitForSelector('#call-sandbox');
      expect(result.sandbox).toMatchObject({ filesystem: 'workspace-write', workspace: s.dir });
      expect(await page.textContent('#call-sandbox')).toBe(
        `workspace-write; network off; workspace ${s.dir}; limits: cpu 30 s, file size 1.0 MiB`,
      );
      expect(w.errors).toEqual([]);
      await expectNoLeaks(s);
    },
  );

  it('renders tool output as text: markup and script in a stream show as characters and run nothing', async () => {
    const s = await startTestServer();
    const payload = [
      '<img src=x onerror="fetch(\'/pwned\');alert(1)">',
      '</script><script>alert(2)</script>',
      '<svg onload=alert(3)>',
      '"><iframe src=javascript:alert(4)>',
    ];
    const command = `printf '%s\\n' ${payload.map((p) => `'${p.replaceAll("'", "'\\''")}'`).join(' ')}`;
    const { callId, result } = await runCall(s, 'bash', { command });
    w = await watchedPage(browser());
    const { page } = w;
    await openView(w, s, `#/call/${callId}`);
    await page.waitForFunction(() => document.getElementById('display-kind')?.textContent === 'final display');
    await page.waitForSelector('[data-preview="stdout"] pre:not(:text("…"))');
    // The final display names the command, markup and all, as text.
    expect(await page.textContent('#display')).toBe(result.display);
    expect(result.display).toContain('<img src=x');
    for (const p of payload) {
      expect(await page.textContent('[data-preview="stdout"] pre')).toContain(p);
      expect(await page.textContent('#model-view')).toContain(p);
    }
    await page.evaluate(
      (h) => (location.hash = h),
      `#/read?uri=${encodeURIComponent(streamUri(result.output, 'stdout'))}&line=0`,
    );
    await page.waitForSelector('[data-line="3"]');
    expect(await page.textContent('[data-line="0"] .tx')).toBe(payload[0]);
    expect(await page.textContent('[data-line="1"] .tx')).toBe(payload[1]);
    await page.fill('#pattern', 'script');
    await page.click('#find');
    await page.waitForSelector('[data-hit="1"]');
    expect(await page.textContent('[data-hit="1"] .tx')).toBe(payload[1]);
    await screenshot(page, shots, 'xss-as-text');
    // Nothing became an element: the page's own script is the only one, no image, frame or svg exists.
    expect(await page.locator('script').count()).toBe(1);
    expect(await page.locator('main img, main iframe, main svg').count()).toBe(0);
    expect(w.dialogs).toEqual([]);
    expect(w.requests.filter((u) => u.includes('pwned') || new URL(u).pathname === '/x')).toEqual([]);
    expect(foreignRequests(w, s)).toEqual([]);
    expect(w.errors).toEqual([]);
    await expectNoLeaks(s);
  });

  it('a wrong token shows only the prompt, no data; the right one typed in opens the view', async () => {
    const s = await startTestServer();
    await runCall(s, 'bash', { command: 'echo secret-output' }, { session: 'hidden' });
    w = await watchedPage(browser());
    const { page } = w;
    await page.goto(`${s.url}/#token=${'0'.repeat(64)}`);
    await page.waitForSelector('#login:not([hidden])');
    await page.waitForSelector('#login-error:not([hidden])');
    expect(await page.textContent('#login-error')).toBe('The server refused this token.');
    expect(await page.isHidden('#nav')).toBe(true);
    expect(await page.textContent('main')).toBe('');
    expect(await page.evaluate(() => sessionStorage.getItem('sluice.token'))).toBeNull();
    // The page asked for /v1/info alone (refused), and the token never was in a URL it requested.
    const api = w.requests.filter((u) => new URL(u).pathname.startsWith('/v1/'));
    expect(api.map((u) => new URL(u).pathname)).toEqual(['/v1/info']);
    expect(w.requests.filter((u) => u.includes(s.token) || u.includes('0'.repeat(64)))).toEqual([]);
    expect(await page.content()).not.toContain('secret-output');
    await screenshot(page, shots, 'token-prompt');
    await page.fill('#token', s.token);
    await page.click('#login button');
    await page.waitForSelector('.row .status.success');
    expect(await page.isHidden('#login')).toBe(true);
    expect(w.errors.filter((e) => !e.includes('401'))).toEqual([]);
    expect(w.dialogs).toEqual([]);
    await expectNoLeaks(s);
  });

  it('a malformed address shows a message or the prompt, and the page keeps working', async () => {
    const s = await startTestServer();
    w = await watchedPage(browser());
    const { page } = w;
    // A token that is not a valid escape: the prompt, not a dead page.
    await page.goto(`${s.url}/#token=%zz`);
    await page.waitForSelector('#login:not([hidden])');
    expect(await page.textContent('main')).toBe('');
    await openView(w, s, '#/call/%E0%A4%A');
    await page.waitForSelector('#bad-address');
    expect(await page.textContent('#bad-address')).toBe('This address is malformed: #/call/%E0%A4%A');
    await page.evaluate(() => (location.hash = '#/calls'));
    await page.waitForSelector('#calls-count');
    expect(await page.textContent('#calls-count')).toBe('0 of 0 calls');
    expect(w.errors.filter((e) => !e.includes('401'))).toEqual([]);
    await expectNoLeaks(s);
  });

  it('lists 2,000 calls and scrolls through them keeping only the rows in view', { timeout: 180_000 }, async () => {
    const s: TestServer = await startTestServer(['echo'], { retainCalls: 3000 });
    const ids: string[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const started = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          s.start('echo', { text: `call ${batch * 200 + i}` }, { session: `s${batch}` }),
        ),
      );
      for (const id of started) expect((await s.api(`/v1/calls/${id}?wait=60`)).status).toBe(200);
      ids.push(...started);
    }
    // The order the server tracked them in (concurrent starts may arrive in any order): oldest first.
    const listed = ((await (await s.api('/v1/calls')).json()) as { calls: Array<{ callId: string }> }).calls.map(
      (c) => c.callId,
    );
    expect([...listed].sort()).toEqual([...ids].sort());
    w = await watchedPage(browser());
    const { page } = w;
    await openView(w, s);
    await page.waitForFunction(() => document.getElementById('calls-count')?.textContent === '2,000 of 2,000 calls');
    const list = page.locator('#calls-list');
    const rows = () => page.locator('#calls-list .row').count();
    expect(await rows()).toBeLessThan(80);
    // Newest first: the first row is the last call started.
    expect(await page.getAttribute('#calls-list .row[data-index="0"]', 'data-call-id')).toBe(listed.at(-1));
    for (const fraction of [0.25, 0.5, 0.75, 1]) {
      await list.evaluate((el, f) => {
        el.scrollTop = (el.scrollHeight - el.clientHeight) * f;
      }, fraction);
      await page.waitForFunction((f) => {
        const el = document.getElementById('calls-list') as PageElement;
        const top = Math.floor(el.scrollTop / 24);
        return f < 1 ? !!el.querySelector(`.row[data-index="${top}"]`) : !!el.querySelector('.row[data-index="1999"]');
      }, fraction);
      expect(await rows()).toBeLessThan(80);
    }
    expect(await page.getAttribute('#calls-list .row[data-index="1999"]', 'data-call-id')).toBe(listed[0]);
    await page.selectOption('#filter-tool', 'echo');
    await page.fill('#filter-session', 's3');
    expect(await page.textContent('#calls-count')).toBe('200 of 2,000 calls');
    expect(w.errors).toEqual([]);
    await expectNoLeaks(s);
  });
});
