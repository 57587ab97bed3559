/**
 * One byte formatter (engine/protocol/units.ts) for every size shown to
 * people: the bash tool's status line, the read tool's, an incomplete call's
 * display, the CLI's reports. A success and a cancellation say sizes alike.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { formatBytes } from '../../engine/protocol/units.js';
import { ROOT } from '../server/helpers.js';
import { closeEngines, expectStoreClean, openEngine, uniqueSleep, waitNoProcess } from '../support/engines.js';

afterEach(closeEngines);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith('.ts') ? [join(dir, d.name)] : [],
  );
}

describe('byte units', () => {
  it('are binary with one decimal, rounded down, never showing the next unit', () => {
    const sizes = [0, 1, 1023, 1024, 1536, 1024 * 1024 - 1, 100 * 1024 * 1024, 2 ** 31, 5 * 1024 ** 4];
    expect(sizes.map(formatBytes)).toEqual([
      '0 B',
      '1 B',
      '1023 B',
      '1.0 KiB',
      '1.5 KiB',
      '1023.9 KiB',
      '100.0 MiB',
      '2.0 GiB',
      '5.0 TiB',
    ]);
  });

  it('no other module formats sizes with units of its own', () => {
    const offenders = ['engine', 'cli', 'server', 'compaction', 'workers', 'store']
      .flatMap((d) => sources(join(ROOT, d)))
      .filter((f) => !f.endsWith(join('protocol', 'units.ts')))
      .filter((f) => /[)}] (KiB|MiB|GiB)`|\$\{\w+\} B`/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f));
    expect(offenders).toEqual([]);
  });

  it('docs/presentation.md writes the display sizes as formatBytes does', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'presentation.md'), 'utf8');
    const at = doc.indexOf('as the display writes sizes');
    expect(at).toBeGreaterThan(0);
    const examples = [...doc.slice(at, doc.indexOf('\n\n', at)).matchAll(/`([^`]+)`/g)].map((m) => m[1]).slice(0, 3);
    expect(examples).toEqual([formatBytes(70), formatBytes(575 * 1024), formatBytes(3 * 1024 * 1024)]);
    // Every size in a shown hint or display example is one formatBytes can write.
    for (const m of doc.matchAll(/\((\d+(?:\.\d)? (?:B|KiB|MiB|GiB)) total\)/g)) {
      expect(m[1]).toMatch(/^(\d{1,4} B|\d+\.\d (KiB|MiB|GiB))$/);
    }
  });

  it('a successful bash call and a cancelled one write sizes the same way', async () => {
    const { engine } = await openEngine();
    const ok = await engine.run('bash', { command: 'printf abc' });
    expect(ok.display).toMatch(/· stdout 3 B · stderr 0 B ·/);
    const sleeper = uniqueSleep();
    const handle = engine.call('bash', { command: `printf abcd; exec ${sleeper.command}` });
    for await (const ev of handle.events()) if (ev.type === 'display' && ev.text.includes('abcd')) break;
    handle.cancel('enough');
    const cancelled = await handle.result;
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.display).toContain('stdout 4 B in 1 line');
    await expectStoreClean(engine);
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
  });
});
