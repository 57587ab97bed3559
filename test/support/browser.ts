/**
 * A real headless Chromium for the suites that need one (Debian's package,
 * driven by playwright-core), and the one line that says why they did not
 * run where there is none.
 *
 * ```ts
 * const chromium = await chromiumBrowser();
 * describe.runIf(chromium)('the web view', () => {
 *   const browser = useBrowser(() => chromium!);
 *   it('...', async () => { const page = await browser().newPage(); ... });
 * });
 * ```
 */
import { constants, promises as fsp } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { reportNotRun } from './run.js';

/** Where the browser is: `SLUICE_TEST_CHROMIUM`, else Debian's `/usr/bin/chromium`. */
export const CHROMIUM_PATH = process.env.SLUICE_TEST_CHROMIUM || '/usr/bin/chromium';

/**
 * Flags for this machine: no sandbox (tests run as root, where Chromium's
 * sandbox refuses to start), no GPU, and none of the background connections
 * (sync, component updates, QUIC probes) that a closed network refuses at
 * every start. playwright-core passes some of them already; they are listed
 * here so the set does not depend on its version.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A Chromium the tests can launch. */
export interface ChromiumBrowser {
  readonly executablePath: string;
  /** A new headless browser with its own empty profile (removed by playwright on close). */
  launch(): Promise<Browser>;
}

let found: Promise<ChromiumBrowser | undefined> | undefined;

async function find(): Promise<ChromiumBrowser | undefined> {
  const executablePath = CHROMIUM_PATH;
  const present = await fsp.access(executablePath, constants.X_OK).then(
    () => true,
    () => false,
  );
  if (!present) {
    await reportNotRun('Browser suites', `no Chromium at ${executablePath} (Debian package chromium)`);
    return undefined;
  }
  return {
    executablePath,
    launch: () => chromium.launch({ executablePath, headless: true, args: [...CHROMIUM_ARGS], timeout: 30_000 }),
  };
}

/**
 * The machine's Chromium, or undefined (the reason is recorded and printed
 * once at the end of the run). Call it at the top level of a test file and
 * gate with `describe.runIf(...)`. A browser that is present but fails to
 * launch fails the test: that is a bug, not a missing part.
 */
export function chromiumBrowser(): Promise<ChromiumBrowser | undefined> {
  found ??= find();
  return found;
}

/**
 * One browser for the enclosing suite: launched before its tests, closed
 * after them. Returns a getter; `chromium` is a getter because the suite is
 * declared before the browser is known to exist.
 */
export function useBrowser(chromium: () => ChromiumBrowser): () => Browser {
  let browser: Browser | undefined;
  beforeAll(async () => {
    browser = await chromium().launch();
  });
  afterAll(async () => {
    await browser?.close();
    browser = undefined;
  });
  return () => {
    if (browser === undefined) throw new Error('useBrowser: the browser is not running');
    return browser;
  };
}
