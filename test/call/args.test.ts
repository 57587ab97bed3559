/**
 * Strict tool arguments: validated in the worker against the tool's zod
 * object, made strict by defineTool. A bad field fails the call with EBADARGS
 * naming the field, before the tool runs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeEngines, engineWith, expectStoreClean, singleText } from '../support/engines.js';

afterEach(closeEngines);

describe('strict arguments', () => {
  it('an unknown field fails the call with EBADARGS naming the field', async () => {
    const { engine } = await engineWith(['echo']);
    const r = await engine.run('echo', { text: 'hi', surprise: true });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EBADARGS' } });
    expect(r.error?.message).toContain('surprise');
    // The tool never ran: nothing was written, so nothing is published.
    expect(r.output).toBeNull();
    expect(r.model).toContain('EBADARGS');
    await expectStoreClean(engine);
  });

  it('a wrong type fails the call with EBADARGS naming the field', async () => {
    const { engine } = await engineWith(['echo']);
    const r = await engine.run('echo', { text: 42 });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EBADARGS' } });
    expect(r.error?.message).toMatch(/\btext\b/);
  });

  it('a missing required field and a nested wrong type are named by their path', async () => {
    const { engine } = await engineWith(['echo']);
    const missing = await engine.run('echo', {});
    expect(missing.error).toMatchObject({ code: 'EBADARGS' });
    expect(missing.error?.message).toMatch(/\btext\b/);
    const nested = await engine.run('echo', { text: 'x', nested: { n: 'not a number' } });
    expect(nested.error).toMatchObject({ code: 'EBADARGS' });
    expect(nested.error?.message).toContain('nested.n');
  });

  it('the bash tool rejects unknown fields and a non-integer timeout', async () => {
    const { engine } = await engineWith([]);
    const unknown = await engine.run('bash', { command: 'echo hi', shell: 'zsh' });
    expect(unknown.error).toMatchObject({ code: 'EBADARGS' });
    expect(unknown.error?.message).toContain('shell');
    const badTimeout = await engine.run('bash', { command: 'echo hi', timeout: 'soon' });
    expect(badTimeout.error).toMatchObject({ code: 'EBADARGS' });
    expect(badTimeout.error?.message).toContain('timeout');
  });

  it('valid arguments pass through to the tool unchanged', async () => {
    const { engine } = await engineWith(['echo']);
    const r = await engine.run('echo', { text: 'ab', times: 3 });
    expect(r.status).toBe('success');
    expect(await singleText(engine, r)).toBe('ababab');
  });
});
