/**
 * Closing an engine leaves nothing running: the process can exit at once.
 * How the bug shows if it returns: every finished call left a 2 s settle
 * timer behind, so a CLI or a host process lingered after its work was done.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const script = `
import { Engine } from ${JSON.stringify(new URL('../../dist/engine/engine.js', import.meta.url).href)};
const engine = await Engine.open({ store: process.argv[1] });
const r = await engine.run('bash', { command: 'echo hi' });
await engine.close();
const closedAt = performance.now();
process.on('exit', () => console.log(JSON.stringify({ status: r.status, lingerMs: performance.now() - closedAt, handles: process.getActiveResourcesInfo() })));
`;

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
      expect(out.lingerMs).toBeLessThan(500);
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
const h = engine.call('bash', { command: 'exec -a ${marker} sleep 1000' });
for await (const ev of h.events()) if (ev.type === 'display' || ev.type === 'started') break;
await new Promise((r) => setTimeout(r, 300));
process.exit(0);
`;
    try {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', exitScript, join(dir, 'store')], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(r.status).toBe(0);
      await new Promise((res) => setTimeout(res, 200));
      const left = spawnSync('pgrep', ['-f', marker], { encoding: 'utf8' }).stdout.trim();
      expect(left).toBe('');
    } finally {
      spawnSync('pkill', ['-f', marker]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
