/**
 * Output declarations at registration: single output, custom named streams,
 * declared empty streams, declaration order as manifest and rendering order,
 * and every invalid declaration or module rejected with a typed error.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  closeEngines,
  engineWith,
  expectPublished,
  expectStoreClean,
  fixture,
  openEngine,
  readBlob,
  sha256,
  singleText,
  streamBytes,
} from '../support/engines.js';

afterEach(closeEngines);

describe('valid declarations', () => {
  it('single output publishes one blob without a stream heading', async () => {
    const { engine } = await engineWith(['script-single']);
    const info = engine.tools().find((t) => t.name === 'script-single');
    expect(info?.output).toEqual({ kind: 'single' });
    const r = await engine.run('script-single', { steps: [{ text: 'one\n' }, { text: 'two\n' }] });
    expect(r).toMatchObject({ status: 'success', complete: true });
    expect(r.output).toEqual({ kind: 'single', digest: sha256('one\ntwo\n'), bytes: 8, lines: 2, truncated: false });
    expect(await singleText(engine, r)).toBe('one\ntwo\n');
    expect(r.model).toBe('one\ntwo\n');
    await expectStoreClean(engine);
  });

  it('custom named streams each get a blob and a manifest in declaration order', async () => {
    const { engine } = await engineWith(['script-streams']);
    const r = await engine.run('script-streams', {
      steps: [
        { stream: 'diagnostics', text: 'warn: x\n' },
        { stream: 'results', text: 'row 1\nrow 2\n' },
      ],
    });
    expect(r.status).toBe('success');
    expect(r.output?.kind).toBe('streams');
    if (r.output?.kind !== 'streams') return;
    expect(r.output.streams.map((s) => s.name)).toEqual(['results', 'diagnostics']);
    expect(r.output.streams).toEqual([
      { name: 'results', digest: sha256('row 1\nrow 2\n'), bytes: 12, lines: 2, truncated: false },
      { name: 'diagnostics', digest: sha256('warn: x\n'), bytes: 8, lines: 1, truncated: false },
    ]);
    const manifest = await engine.store.loadManifest(r.output.manifest);
    expect(manifest.streams).toEqual(r.output.streams.map(({ truncated: _t, ...s }) => s));
    // The model renders the streams in declaration order, each under its heading.
    expect(r.model.indexOf('[results]')).toBeLessThan(r.model.indexOf('[diagnostics]'));
    await expectPublished(engine, r.output);
    await expectStoreClean(engine);
  });

  it('declared streams that received nothing are kept as empty streams', async () => {
    const { engine } = await engineWith(['script-order']);
    const r = await engine.run('script-order', { steps: [{ stream: 'alpha', text: 'a\n' }] });
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    expect(r.output.streams.map((s) => [s.name, s.bytes, s.lines])).toEqual([
      ['zeta', 0, 0],
      ['alpha', 2, 1],
      ['Mid.dle_2-x', 0, 0],
    ]);
    expect(r.output.streams[0]?.digest).toBe(sha256(''));
    expect(await readBlob(engine, sha256(''))).toEqual(Buffer.alloc(0));
    await expectPublished(engine, r.output);
  });

  it('declaration order, not write order or name order, is manifest and model order', async () => {
    const { engine } = await engineWith(['script-order']);
    const r = await engine.run('script-order', {
      steps: [
        { stream: 'Mid.dle_2-x', text: 'm\n' },
        { stream: 'alpha', text: 'a\n' },
        { stream: 'zeta', text: 'z\n' },
      ],
    });
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const order = ['zeta', 'alpha', 'Mid.dle_2-x'];
    expect(r.output.streams.map((s) => s.name)).toEqual(order);
    const manifest = await engine.store.loadManifest(r.output.manifest);
    expect(manifest.streams.map((s) => s.name)).toEqual(order);
    const positions = order.map((n) => r.model.indexOf(`[${n}]`));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(await streamBytes(engine, r)).toEqual({ zeta: 'z\n', alpha: 'a\n', 'Mid.dle_2-x': 'm\n' });
  });

  it('16 streams and a 64-byte name are the inclusive limits', async () => {
    const { engine } = await engineWith(['max-streams']);
    const info = engine.tools().find((t) => t.name === 'max-streams');
    expect(info?.output.kind === 'streams' && info.output.streams.length).toBe(16);
    const r = await engine.run('max-streams', {});
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    expect(r.output.streams).toHaveLength(16);
    expect(r.output.streams[15]).toMatchObject({ name: 'n'.repeat(64), bytes: 3 });
    expect(r.output.streams[0]).toMatchObject({ name: 's0', bytes: 0 });
    await expectPublished(engine, r.output);
  });
});

describe('invalid declarations and modules', () => {
  const badDecl = (which: string) => `${pathToFileURL(fixture('bad-decl')).href}?case=${which}`;
  const cases = [
    'duplicate',
    'empty',
    'too-long',
    'slash',
    'dotdot',
    'dot',
    'control',
    'newline',
    'space',
    'no-streams',
    'too-many',
  ];

  // One engine for all cases: each registration is one describe task on a warm worker.
  it('every invalid declaration is rejected at registration with EBADDECL and registers nothing', async () => {
    const { engine } = await openEngine();
    const before = engine.tools().map((t) => t.name);
    for (const which of cases) {
      const err = await engine.register(badDecl(which)).catch((e: unknown) => e);
      expect(err, which).toMatchObject({ code: 'EBADDECL' });
    }
    expect(engine.tools().map((t) => t.name)).toEqual(before);
  });

  it('a forged tool object (not from defineTool) with an invalid declaration is rejected on the main side with EBADDECL', async () => {
    const { engine } = await openEngine();
    const before = engine.tools().map((t) => t.name);
    for (const which of cases) {
      const err = await engine.register(badDecl(`forged-${which}`)).catch((e: unknown) => e);
      expect(err, which).toMatchObject({ code: 'EBADDECL' });
    }
    expect(engine.tools().map((t) => t.name)).toEqual(before);
  });

  it('a module that exports no tool is rejected with EBADMODULE', async () => {
    const { engine } = await openEngine();
    const err = await engine.register(fixture('no-tool')).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EBADMODULE' });
  });

  it('a module that throws while importing is rejected with EBADMODULE', async () => {
    const { engine } = await openEngine();
    const err = await engine.register(fixture('import-fails')).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EBADMODULE' });
    expect((err as Error).message).toContain('import-fails');
  });

  it('a module with a syntax error or a missing file is rejected with EBADMODULE', async () => {
    const { engine, dir } = await openEngine();
    const broken = join(dir, 'syntax-error.mjs');
    await fsp.writeFile(broken, "export default defineTool({ name: 'x', ]);\n");
    expect(await engine.register(broken).catch((e: unknown) => e)).toMatchObject({ code: 'EBADMODULE' });
    const missing = join(dir, 'does-not-exist.mjs');
    expect(await engine.register(missing).catch((e: unknown) => e)).toMatchObject({ code: 'EBADMODULE' });
  });

  it('a rejected registration leaves the engine serving other tools', async () => {
    const { engine } = await engineWith(['script-single']);
    await engine.register(fixture('import-fails')).catch(() => {});
    await engine.register(badDecl('duplicate')).catch(() => {});
    const r = await engine.run('script-single', { steps: [{ text: 'ok' }] });
    expect(r.status).toBe('success');
    expect(await singleText(engine, r)).toBe('ok');
  });

  it('an unknown tool fails synchronously with EUNKNOWNTOOL', async () => {
    const { engine } = await openEngine();
    expect(() => engine.call('nope', {})).toThrow(expect.objectContaining({ code: 'EUNKNOWNTOOL' }));
  });
});
