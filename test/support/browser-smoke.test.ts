/**
 * The browser test harness against the real Chromium (test/support/browser.ts):
 * a page served on loopback is opened, clicked, read and photographed, and
 * closing the browser leaves no process or profile behind.
 */
import { promises as fsp, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { childPids } from '../store/helpers.js';
import { chromiumBrowser, useBrowser } from './browser.js';

const chromium = await chromiumBrowser();

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>smoke</title></head>
<body>
  <button id="go">Count</button>
  <p id="out">not clicked</p>
  <script>
    let n = 0;
    document.getElementById('go').addEventListener('click', () => {
      n += 1;
      document.getElementById('out').textContent = 'clicked ' + n;
    });
  </script>
</body></html>`;

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** This process's Chromium children with the profile directory each was given. */
function chromiumChildren(): Array<{ pid: number; profile: string | undefined }> {
  const out: Array<{ pid: number; profile: string | undefined }> = [];
  for (const pid of childPids()) {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (!args[0]?.includes('chromium')) continue;
      const dir = args.find((a) => a.startsWith('--user-data-dir='));
      out.push({ pid, profile: dir?.slice('--user-data-dir='.length) });
    } catch {
      // Ended while we looked.
    }
  }
  return out;
}

describe.runIf(chromium)('the test browser (headless Chromium)', () => {
  const browser = useBrowser(() => chromium!);
  let server: Server;
  let url: string;
  let dir: string;

  beforeAll(async () => {
    dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-browser-'));
    server = createServer((req, res) => {
      if (req.url !== '/') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())));
    await fsp.rm(dir, { recursive: true, force: true });
  });

  it('opens a page from loopback, runs its script on a click and shows the new text', async () => {
    const page = await browser().newPage();
    try {
      const response = await page.goto(url);
      expect(response?.status()).toBe(200);
      expect(await page.textContent('#out')).toBe('not clicked');
      await page.click('#go');
      await page.click('#go');
      expect(await page.textContent('#out')).toBe('clicked 2');
    } finally {
      await page.close();
    }
  });

  it('writes a screenshot as a PNG of the viewport into the test directory', async () => {
    const page = await browser().newPage({ viewport: { width: 640, height: 360 } });
    try {
      await page.goto(url);
      const file = join(dir, 'page.png');
      await page.screenshot({ path: file });
      const png = await fsp.readFile(file);
      expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
      // IHDR, the first chunk, holds width and height.
      expect(png.subarray(12, 16).toString('latin1')).toBe('IHDR');
      expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([640, 360]);
    } finally {
      await page.close();
    }
  });

  it('leaves no process and no profile directory behind once closed', async () => {
    const before = new Set(chromiumChildren().map((c) => c.pid));
    const own = await chromium!.launch();
    const started = chromiumChildren().filter((c) => !before.has(c.pid));
    expect(started.length).toBeGreaterThanOrEqual(1);
    await own.close();
    const left = chromiumChildren().map((c) => c.pid);
    for (const c of started) {
      expect(left).not.toContain(c.pid);
      expect(c.profile).toBeDefined();
      await expect(fsp.access(c.profile!)).rejects.toThrow();
    }
  });
});
