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
