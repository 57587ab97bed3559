/**
 * A host may close an engine, or exit, while the pool's first thread is still
 * loading its entry module (`sluice tools` does: it opens an engine, lists
 * the tools and closes). On Node 20, a thread stopped while `require()` is
 * instantiating an ES module aborts the whole process with a V8 fatal error,
 * so piscina is handed a CommonJS file that loads the entry with `import()`
 * (workers/entry-loader.cts).
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { workerEntry } from '../../engine/pool/dist-paths.js';

const run = promisify(execFile);

/** Starts threads that require `argv[1]` as piscina does, stopping each after 0-39 ms. */
const STOP_WHILE_LOADING = `
const { Worker } = require('node:worker_threads');
const file = JSON.stringify(process.argv[1]);
(async () => {
  for (let i = 0; i < 120; i++) {
    const w = new Worker('try { const m = require(' + file + '); if (m.default && m.default.then) m.default.catch(() => {}); } catch {}', { eval: true });
    w.on('error', () => {});
    await new Promise((r) => setTimeout(r, i % 40));
    await w.terminate();
  }
  console.log('120 threads stopped');
})();
`;

describe('closing while the first thread loads', () => {
  it('piscina requires a CommonJS file whose task function arrives through import()', async () => {
    expect(workerEntry()).toMatch(/\/dist\/workers\/entry-loader\.cjs$/);
    // What piscina's require() returns: the ES module graph is not loaded synchronously.
    const w = new Worker(
      `const m = require(${JSON.stringify(workerEntry())});
       const { parentPort } = require('node:worker_threads');
       parentPort.postMessage([m.__esModule, m.default instanceof Promise]);
       m.default.then((f) => parentPort.postMessage(typeof f));`,
      { eval: true },
    );
    const messages: unknown[] = [];
    await new Promise<void>((resolve, reject) => {
      w.on('message', (m) => {
        messages.push(m);
        if (messages.length === 2) resolve();
      });
      w.on('error', reject);
    });
    await w.terminate();
    expect(messages).toEqual([[true, true], 'function']);
  });

  it('an entry that cannot load fails each task with its own error, not a missing handler', async () => {
    const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-loader-'));
    try {
      await fsp.copyFile(workerEntry(), join(dir, 'entry-loader.cjs'));
      await fsp.writeFile(join(dir, 'entry.js'), "import './missing-module.js';\n");
      const w = new Worker(
        `const { parentPort } = require('node:worker_threads');
         require(${JSON.stringify(join(dir, 'entry-loader.cjs'))}).default
           .then((task) => task({}))
           .catch((e) => parentPort.postMessage(String(e.code) + ' ' + e.message));`,
        { eval: true },
      );
      const message = await new Promise<string>((resolve, reject) => {
        w.on('message', resolve);
        w.on('error', reject);
      });
      await w.terminate();
      expect(message).toMatch(/^ERR_MODULE_NOT_FOUND Cannot find module '.*missing-module\.js'/);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
    await expect(fsp.stat(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('threads stopped at any point of loading the file piscina requires leave the process running', async () => {
    // 120 threads, each stopped 0-39 ms after it starts requiring the file, as closing a pool
    // stops a thread that is still loading; with require() of the ES module entry on Node 20 a
    // run like this aborts with SIGABRT about one time in three.
    const { stdout } = await run(process.execPath, ['-e', STOP_WHILE_LOADING, workerEntry()]);
    expect(stdout).toBe('120 threads stopped\n');
  });
});
