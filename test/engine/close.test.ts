/**
 * Closing an engine leaves nothing running: the process can exit at once.
 * How the bug shows if it returns: every finished call left a 2 s settle
 * timer behind, so a CLI or a host process lingered after its work was done
 * (checked by what keeps the process alive right after close, not by timing
 * its exit).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitNoProcess } from '../support/engines.js';

const script = `
import { Engine } from ${JSON.stringify(new URL('../../dist/engine/engine.js', import.meta.url).href)};
const engine = await Engine.open({ store: process.argv[1] });
const r = await engine.run('bash', { command: 'echo hi' });
await engine.close();
// What still keeps the process alive right after close (unref'd handles are not listed).
console.log(JSON.stringify({ status: r.status, pending: process.getActiveResourcesInfo() }));
`;

/** Resources that end by themselves (a file operation in flight, the stdio pipes), as opposed to timers, ports, workers, children. */
const SETTLING = /^(FSReqCallback|FSReqPromise|FileHandleCloseReq|PipeWrap|TTYWrap)$/;

describe('Engine.close', () => {
  it('leaves no timer, port or worker behind: the process exits right after', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-close-'));
    try {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script, join(dir, 'store')], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}');
      expect(out.status).toBe('success');
      // A settle timer, a port or a worker left behind would be listed here (a timer as `Timeout`).
      expect((out.pending as string[]).filter((t) => !SETTLING.test(t))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('process exit without close', () => {
  // How the bug shows if it returns: a second Ctrl-C on `sluice run` exits at once and the
  // command's processes, in their own detached group, keep running.
  it('kills the process groups of running calls when the host exits abruptly', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-exit-'));
    const marker = `sluice-exit-marker-${process.pid}-${Date.now()}`;
    const exitScript = `
import { Engine } from ${JSON.stringify(new URL('../../dist/engine/engine.js', import.meta.url).href)};
const engine = await Engine.open({ store: process.argv[1] });
const h = engine.call('bash', { command: 'echo started; exec -a ${marker} sleep 1000' });
// The first display follows bash's process-group report on the same port: the group is registered.
for await (const ev of h.events()) if (ev.type === 'display') break;
process.exit(0);
`;
    try {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', exitScript, join(dir, 'store')], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(r.status).toBe(0);
      // SIGKILLed by the exit hook: gone as soon as the kernel has ended it (the wait only bounds a failure).
      expect(await waitNoProcess(marker)).toEqual([]);
    } finally {
      spawnSync('pkill', ['-f', marker]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
