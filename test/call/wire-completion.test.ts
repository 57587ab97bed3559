/**
 * The completion check's short cut (engine/call/wire-completion.ts): a
 * completion of its mode alone is accepted without the schema, and every
 * other shape gets exactly the schema's verdict and data.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { parseCompletion } from '../../engine/call/wire-completion.js';
import { firstIssue } from '../../engine/protocol/issues.js';
import { wireCompletionSchema } from '../../engine/protocol/messages.js';
import { closeEngines, engineWith, expectStoreClean } from '../support/engines.js';

afterEach(closeEngines);

const cases: Array<[string, unknown]> = [
  ['streamed alone', { mode: 'streamed' }],
  ['full alone', { mode: 'full' }],
  ['an unknown mode', { mode: 'partial' }],
  ['no mode', {}],
  ['a field beside the mode', { mode: 'streamed', display: 'done' }],
  ['an undefined field beside the mode', { mode: 'streamed', note: undefined }],
  ['an unknown key', { mode: 'streamed', extra: 1 }],
  ['a bad field', { mode: 'full', metadata: 'not a record' }],
  [
    'a class instance',
    new (class {
      mode = 'streamed';
    })(),
  ],
  ['an array', ['streamed']],
  ['null', null],
  ['a string', 'streamed'],
];

describe('completion check', () => {
  it.each(cases)('gives the schema verdict and data for %s', (_name, raw) => {
    const ours = parseCompletion(raw);
    const schema = wireCompletionSchema.safeParse(raw);
    expect(ours.success).toBe(schema.success);
    if (ours.success && schema.success) expect(ours.data).toStrictEqual(schema.data);
    if (!ours.success && !schema.success) {
      const i = firstIssue(schema.error, raw);
      expect(ours.message).toBe(`${i.path || '(completion)'}: ${i.message} (${i.got})`);
      expect(ours.message).not.toContain('\n');
    }
  });

  it('accepts a mode alone as a fresh object of that mode', () => {
    const raw = { mode: 'full' };
    const r = parseCompletion(raw);
    expect(r).toEqual({ success: true, data: { mode: 'full' } });
    if (r.success) expect(r.data).not.toBe(raw);
  });

  it('an assistant-role message fails the call EPROTOCOL with one line naming the field and the value', async () => {
    const { engine } = await engineWith(['assistant-message']);
    const r = await engine.run('assistant-message', {});
    expect(r).toMatchObject({ status: 'failed', error: { code: 'EPROTOCOL' } });
    expect(r.error?.message).toMatch(
      /^invalid completion: messages\.0\.role: Invalid option: expected one of "user"\|"system" \(got "assistant"\)$/,
    );
    await expectStoreClean(engine);
  });
});
