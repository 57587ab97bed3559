/**
 * The recorder's two hot-path short cuts for log lines: a line framed
 * straight into bytes is the same bytes as the string framing, and a field is
 * spilled exactly when its JSON is longer than the inline bound, whether or
 * not the bound could be judged without serialising it.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { frameLine, frameLineBytes, loadHasher, unframeLine } from '../../engine/sessions/frame.js';
import { spillOversized } from '../../engine/sessions/spill.js';
import { Store } from '../../store/store.js';
import { tempDir, tmpEntries } from '../store/helpers.js';

describe('log line framing and spilling', () => {
  it('frames a line into the same bytes as the string framing, and it reads back', async () => {
    const h = await loadHasher();
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ unit: 'grapheme' }), (value, text) => {
        for (const json of [JSON.stringify(value), JSON.stringify({ text })]) {
          const bytes = frameLineBytes(h, json);
          expect(bytes.equals(Buffer.from(frameLine(h, json), 'utf8'))).toBe(true);
          expect(unframeLine(h, bytes.subarray(0, -1))).toBe(json);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('spills a field exactly when its JSON passes the bound', async () => {
    const store = await Store.open(join(await tempDir(), 'store'));
    const samples = fc.sample(
      fc.tuple(
        fc.oneof(
          fc.string({ unit: 'binary', maxLength: 12 }),
          fc.constant({}),
          fc.constant([]),
          fc.constant(null),
          fc.integer(),
          fc.double(),
          fc.boolean(),
          fc.jsonValue({ maxDepth: 2 }),
        ),
        fc.integer({ min: 0, max: 80 }),
      ),
      { numRuns: 400, seed: 21 },
    );
    for (const [field, limit] of samples) {
      const spilled = await spillOversized(store, { type: 'x', field }, ['field'], limit);
      const over = Buffer.byteLength(JSON.stringify(field) ?? '', 'utf8') > limit;
      expect('spill' in spilled.record, `${JSON.stringify(field)} at ${limit}`).toBe(over);
      expect(spilled.pin !== undefined).toBe(over);
      await spilled.pin?.release();
    }
    expect(await tmpEntries(store)).toEqual([]);
    await store.close();
  });
});
