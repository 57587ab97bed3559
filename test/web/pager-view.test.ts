/**
 * The web view's artifact pager, sessions and store in a real headless
 * Chromium against a real server: a 1,000,000-line artifact paged to line
 * 900,000 one page at a time, search results that jump to their lines, a
 * line longer than a page continued by byteOffset, invalid UTF-8 marked,
 * a session replayed and reverted, the store's counts and its last
 * collection and verification.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cleanup, startTestServer, type TestServer, tempDir } from '../server/helpers.js';
import { chromiumBrowser, useBrowser } from '../support/browser.js';
import {
  expectNoLeaks,
  foreignRequests,
  openView,
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

const chromium = await chromiumBrowser();

/** The pager's address for `uri` at `line`. */
function pager(uri: string, line: number): string {
  return `#/read?uri=${encodeURIComponent(uri)}&line=${line}`;
}

describe.runIf(chromium)('the web view pager, sessions and store (headless Chromium)', () => {
  const browser = useBrowser(() => chromium!);
  let shots: string;
  let w: WatchedPage | undefined;
  let s: TestServer;
  /** The stdout of `seq 0 999999`: 1,000,000 lines, 6,888,890 bytes. */
  let million: string;
  beforeAll(async () => {
    shots = await tempDir('sluice-web-shots-');
    s = await startTestServer();
    const { result } = await runCall(s, 'bash', { command: 'seq 0 999999' }, { session: 'big' });
    million = streamUri(result.output, 'stdout');
  });
  afterEach(async () => {
    await w?.page.close();
    w = undefined;
  });
  afterAll(cleanup);

  /** Runs `command` in bash and opens the pager on its stdout at line 0 (in `w`); returns it. */
  async function pagerOnStdout(command: string): Promise<WatchedPage> {
    const { result } = await runCall(s, 'bash', { command });
    w = await watchedPage(browser());
    await openView(w, s, pager(streamUri(result.output, 'stdout'), 0));
    return w;
  }

  it('pages to line 900,000 of a 1,000,000-line artifact a page at a time, then on and back', async () => {
    w = await watchedPage(browser());
    const { page } = w;
    const reads: Array<{ url: string; bytes: number }> = [];
    page.on('response', async (r) => {
      if (new URL(r.url()).pathname === '/v1/read') reads.push({ url: r.url(), bytes: (await r.body()).length });
    });
    await openView(w, s, pager(million, 900_000));
    await page.waitForSelector('[data-line="900000"]');
    expect(await page.textContent('[data-line="900000"] .ln')).toBe('900000');
    expect(await page.textContent('[data-line="900000"] .tx')).toBe('900000');
    expect(await page.textContent('[data-line="900199"] .tx')).toBe('900199');
    expect(await page.locator('#page .line').count()).toBe(200);
    expect(await page.textContent('#where')).toBe('lines 900,000–900,199 of 1,000,000 (zero-based)');
    expect(await page.getAttribute('[data-line="900000"]', 'class')).toBe('line target');
    await screenshot(page, shots, 'pager');
    await page.click('#next');
    await page.waitForSelector('[data-line="900200"]');
    expect(await page.textContent('[data-line="900399"] .tx')).toBe('900399');
    await page.click('#prev');
    await page.waitForSelector('[data-line="900000"]');
    await page.fill('#line', '999999');
    await page.click('#go');
    await page.waitForSelector('[data-line="999999"]');
    expect(await page.locator('#page .line').count()).toBe(1);
    expect(await page.isDisabled('#next')).toBe(true);
    // Each jump was one read of one page: the browser never held the artifact.
    expect(reads.length).toBe(4);
    for (const r of reads) {
      expect(new URL(r.url).searchParams.get('limit')).toBe('200');
      expect(r.bytes).toBeLessThan(4096);
    }
    expect(await page.evaluate(() => location.hash)).toBe(pager(million, 999_999));
    expect(w.errors).toEqual([]);
    expect(foreignRequests(w, s)).toEqual([]);
  });

  it('searches the artifact and jumps to a match', async () => {
    w = await watchedPage(browser());
    const { page } = w;
    await openView(w, s, pager(million, 0));
    await page.waitForSelector('[data-line="0"]');
    await page.fill('#pattern', '^12345[0-9]$');
    await page.check('#regex');
    await page.click('#find');
    await page.waitForSelector('[data-hit="123459"]');
    expect(await page.textContent('#search-summary')).toBe('10 matching lines');
    const hits = await page.locator('[data-hit]').evaluateAll((els) => els.map((e) => e.getAttribute('data-hit')));
    expect(hits).toEqual(Array.from({ length: 10 }, (_, i) => String(123450 + i)));
    await page.click('[data-hit="123457"]');
    await page.waitForSelector('[data-line="123457"].target');
    expect(await page.textContent('[data-line="123457"] .tx')).toBe('123457');
    expect(await page.textContent('#where')).toBe('lines 123,457–123,656 of 1,000,000 (zero-based)');
    await screenshot(page, shots, 'search');
    expect(w.errors).toEqual([]);
  });

  it('continues a line longer than a page by byteOffset and marks invalid UTF-8 as U+FFFD', async () => {
    // Line 1 has two invalid bytes; line 2 is 3,000,000 bytes, more than a page (2 MiB) holds.
    const { page, errors } = await pagerOnStdout(
      "printf 'ok\\n\\xff\\xfe bad\\n'; head -c 3000000 /dev/zero | tr '\\0' x; printf '\\nend\\n'",
    );
    await page.waitForSelector('[data-line="1"]');
    expect(await page.textContent('[data-line="1"] .tx')).toBe('\uFFFD\uFFFD bad');
    expect(await page.locator('[data-line="1"] .bad').count()).toBe(2);
    expect(await page.isVisible('#lossy')).toBe(true);
    expect(await page.textContent('#lossy')).toContain('not valid UTF-8');
    await screenshot(page, shots, 'pager-invalid-utf8');
    // Page by page to the end: line 2 arrives in parts, each continuing at the byte where the one before stopped.
    const parts: string[] = [];
    for (let i = 0; i < 6 && (await page.locator('[data-line="3"]').count()) === 0; i++) {
      const two = page.locator('[data-line="2"] .tx');
      if ((await two.count()) > 0) parts.push((await two.textContent()) ?? '');
      const at = await page.getAttribute('#page', 'data-at');
      await page.click('#next');
      await page.waitForFunction((prev) => document.getElementById('page')?.getAttribute('data-at') !== prev, at);
    }
    parts.push((await page.textContent('[data-line="2"] .tx')) ?? '');
    expect(await page.textContent('[data-line="3"] .tx')).toBe('end');
    expect(parts.length).toBeGreaterThanOrEqual(2);
    const first = /^(x+) ⤶ continues at byte (\d+) \(Next\)$/.exec(parts[0] as string);
    expect(first?.[1]?.length).toBe(Number(first?.[2]));
    let total = first?.[1]?.length ?? 0;
    for (const p of parts.slice(1)) {
      const m = /^⤷ line 2 from byte (\d+): (x+)( ⤶ continues at byte (\d+) \(Next\))?$/.exec(p);
      expect(Number(m?.[1]), p.slice(0, 60)).toBe(total);
      total += m?.[2]?.length ?? 0;
    }
    expect(total).toBe(3_000_000);
    expect(errors).toEqual([]);
  });

  it('leaves unmarked a U+FFFD the tool wrote itself (valid UTF-8), marking only invalid bytes', async () => {
    const { page, errors } = await pagerOnStdout("printf '\\xef\\xbf\\xbd written\\n'");
    await page.waitForSelector('[data-line="0"]');
    expect(await page.textContent('[data-line="0"] .tx')).toBe('\uFFFD written');
    expect(await page.locator('[data-line="0"] .bad').count()).toBe(0);
    expect(await page.isHidden('#lossy')).toBe(true);
    expect(errors).toEqual([]);
  });

  it('lists sessions, replays one and reverts it to before a call', async () => {
    const ids: string[] = [];
    for (const n of [1, 2, 3])
      ids.push((await runCall(s, 'bash', { command: `echo step ${n}` }, { session: 'rv' })).callId);
    w = await watchedPage(browser());
    const { page } = w;
    await openView(w, s, '#/sessions');
    await page.waitForSelector('[data-session="rv"]');
    expect(await page.textContent('[data-session="big"]')).toContain('big1');
    await screenshot(page, shots, 'sessions');
    await page.click('[data-session="rv"]');
    await page.waitForSelector(`[data-call="${ids[2]}"]`);
    expect(await page.textContent('#replay-info')).toContain('3 live calls, 0 reverted');
    await screenshot(page, shots, 'replay');
    // Asked twice on the page, never through a dialog.
    await page.click(`[data-revert="${ids[1]}"]`);
    expect(await page.textContent(`[data-revert="${ids[1]}"]`)).toBe('Confirm: hide this call and the 1 after it');
    await page.click(`[data-revert="${ids[1]}"]`);
    await page.waitForFunction(() =>
      document.getElementById('replay-info')?.textContent?.includes('1 live calls, 2 reverted'),
    );
    expect(await page.locator('[data-call]').count()).toBe(1);
    const replay = (await (await s.api('/v1/sessions/rv/replay')).json()) as { calls: Array<{ callId: string }> };
    expect(replay.calls.map((c) => c.callId)).toEqual([ids[0]]);
    expect(w.dialogs).toEqual([]);
    expect(w.errors).toEqual([]);
  });

  it('shows the store and the last collection and verification, run from the page', async () => {
    w = await watchedPage(browser());
    const { page } = w;
    await openView(w, s, '#/store');
    await page.waitForSelector('#store-blobs');
    const store = (await (await s.api('/v1/store')).json()) as { blobs: number; bytes: number };
    expect(await page.textContent('#store-blobs')).toBe(store.blobs.toLocaleString('en-US'));
    expect(await page.textContent('#last-gc')).toBe('none run by this server yet');
    await page.click('#run-gc');
    await page.waitForSelector('#last-gc [data-field="dryRun"]');
    expect(await page.textContent('#last-gc [data-field="dryRun"]')).toBe('true');
    expect(await page.textContent('#last-gc [data-field="removed"]')).toBe('0');
    await page.click('#run-verify');
    await page.waitForSelector('#last-verify [data-field="corrupt"]');
    expect(await page.textContent('#last-verify [data-field="corrupt"]')).toBe('—');
    expect(await page.textContent('#last-verify [data-field="scanned"]')).toBe(String(store.blobs));
    await screenshot(page, shots, 'store');
    expect(w.errors).toEqual([]);
    await expectNoLeaks(s);
  });
});
