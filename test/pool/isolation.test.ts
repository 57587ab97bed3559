/**
 * The thread boundary: the main thread never evaluates tool code
 * (registration reads the declaration through a worker). The import rules
 * between folders are test/protocol/layering.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeEngines, engineWith, singleText } from '../support/engines.js';

afterEach(closeEngines);

describe('tool code stays in workers', () => {
  it('registering and calling a tool never evaluates its module on the main thread', async () => {
    const g = globalThis as { __sluiceMarkerLoaded?: number };
    expect(g.__sluiceMarkerLoaded).toBeUndefined();
    const { engine } = await engineWith(['marker']);
    const info = engine.tools().find((t) => t.name === 'marker');
    expect(info).toMatchObject({ output: { kind: 'single' }, source: 'plugin' });
    const r = await engine.run('marker', {});
    expect(r.status).toBe('success');
    // The module refuses to load on a main thread, so success already proves it; the marker says so twice.
    expect(await singleText(engine, r)).toMatch(/^isMainThread=false loads=1\n$/);
    expect(g.__sluiceMarkerLoaded).toBeUndefined();
  });
});
