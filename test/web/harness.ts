/**
 * What the web view's browser tests share: a page opened on a real server
 * with its every error, dialog and request recorded, calls started and
 * awaited through the HTTP API, and screenshots written under the test's
 * directory (and copied to `SLUICE_WEB_SHOTS=DIR` when set, which is how
 * docs/web/*.png are refreshed).
 */
import { promises as fsp, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { expect } from 'vitest';
import type { TestServer } from '../server/helpers.js';
import { childPids, heldPins } from '../store/helpers.js';

/**
 * The little of the page's globals the tests read inside `page.evaluate`
 * (those functions run in the browser; this test program has no DOM types).
 */
export interface PageElement {
  textContent: string | null;
  scrollTop: number;
  scrollHeight: number;
  clientHeight: number;
  querySelector(selector: string): PageElement | null;
  getAttribute(name: string): string | null;
}
/** The page's `document`, `location` and `sessionStorage`, as the tests use them. */
export interface PageGlobals {
  document: { getElementById(id: string): PageElement | null; querySelector(selector: string): PageElement | null };
  location: { hash: string };
  sessionStorage: { getItem(key: string): string | null };
}
declare const location: PageGlobals['location'];

/** A page and what happened on it. */
export interface WatchedPage {
  page: Page;
  /** Uncaught exceptions and console errors. */
  errors: string[];
  /** Dialogs the page opened (alert, confirm, prompt): none is ever expected. */
  dialogs: string[];
  /** Every URL the page requested. */
  requests: string[];
}

/** A new page of `browser` recording errors, dialogs and requests. */
export async function watchedPage(browser: Browser, viewport = { width: 1200, height: 760 }): Promise<WatchedPage> {
  const page = await browser.newPage({ viewport });
  const w: WatchedPage = { page, errors: [], dialogs: [], requests: [] };
  page.on('pageerror', (e) => w.errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') w.errors.push(`console: ${m.text()}`);
  });
  page.on('dialog', (d) => {
    w.dialogs.push(`${d.type()}: ${d.message()}`);
    void d.dismiss();
  });
  page.on('request', (r) => w.requests.push(r.url()));
  return w;
}

/** Opens the web view of `s` with its token in the address's fragment, as `sluice serve` prints it. */
export async function openView(w: WatchedPage, s: TestServer, hash = ''): Promise<void> {
  await w.page.goto(`${s.url}/#token=${s.token}`);
  await w.page.waitForSelector('#nav:not([hidden])');
  if (hash) await w.page.evaluate((h) => (location.hash = h), hash);
}

/** Starts a call through the API and waits for its terminal result. */
export async function runCall(
  s: TestServer,
  tool: string,
  args: unknown,
  extra: Record<string, unknown> = {},
): Promise<{ callId: string; result: Record<string, unknown> & { output: unknown; status: string } }> {
  const callId = await s.start(tool, args, extra);
  const res = await s.api(`/v1/calls/${callId}?wait=60`);
  expect(res.status).toBe(200);
  return { callId, result: (await res.json()) as Record<string, unknown> & { output: unknown; status: string } };
}

/** The artifact URI of stream `name` of a streams output. */
export function streamUri(output: unknown, name: string): string {
  const o = output as { kind: string; manifest: string };
  expect(o.kind).toBe('streams');
  return `artifact://${o.manifest}/${name}`;
}

/** A screenshot of the viewport as `<dir>/<name>.png`, also copied to `SLUICE_WEB_SHOTS` when set. */
export async function screenshot(page: Page, dir: string, name: string): Promise<string> {
  const file = join(dir, `${name}.png`);
  await page.screenshot({ path: file });
  const keep = process.env.SLUICE_WEB_SHOTS;
  if (keep) {
    await fsp.mkdir(keep, { recursive: true });
    await fsp.copyFile(file, join(keep, `${name}.png`));
  }
  const png = await fsp.readFile(file);
  expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
  return file;
}

/** The requests of `w` that went anywhere but the server's own API and page files. */
export function foreignRequests(w: WatchedPage, s: TestServer): string[] {
  const own = /^\/(|web\/(app\.js|app\.css|icon\.svg)|v1\/[a-z0-9/._?=&%-]*)$/i;
  return w.requests.filter((u) => {
    const url = new URL(u);
    return url.origin !== s.url || !own.test(url.pathname + url.search);
  });
}

/**
 * Nothing leaked from the server's calls: the store's tmp/ and pins/ are
 * empty and no child process is left but the test's own browser.
 */
export async function expectNoLeaks(s: TestServer): Promise<void> {
  expect(await fsp.readdir(join(s.storeDir, 'tmp'))).toEqual([]);
  expect(await heldPins(s.storeDir)).toEqual([]);
  const others = childPids().filter((pid) => {
    try {
      return !readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')[0]?.includes('chrom');
    } catch {
      return false;
    }
  });
  expect(others).toEqual([]);
}
