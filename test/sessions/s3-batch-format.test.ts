/**
 * The layout of an S3 session batch object (engine/sessions/s3-batch.ts),
 * without a service: what of a batch goes into a mirror, for whole,
 * truncated, damaged and empty batches, and the keys' numbering.
 */
import { describe, expect, it } from 'vitest';
import { frameLine, loadHasher } from '../../engine/sessions/frame.js';
import {
  batchKey,
  encodeBatch,
  MAX_TRAILER_BYTES,
  normalizeBatch,
  PARTIAL_BATCH_LINE,
  seqOfKey,
  sessionPrefix,
} from '../../engine/sessions/s3-batch.js';

const h = await loadHasher();
const s3 = { base: 'p/q/', objects: undefined as never };

/** What a mirror gets of `body`: the kept bytes and what follows them. */
function mirrored(body: Buffer): Buffer {
  const { keep, extra } = normalizeBatch(h, body.length, body.subarray(Math.max(0, body.length - MAX_TRAILER_BYTES)));
  return Buffer.concat([body.subarray(0, keep), extra]);
}

describe('S3 session batch objects', () => {
  const lines = [1, 2, 3].map((i) =>
    Buffer.from(frameLine(h, JSON.stringify({ type: 'session.revert', before: `c${i}` }))),
  );
  const whole = Buffer.concat(lines);

  it('a whole batch gives its lines, without the trailer', () => {
    const body = encodeBatch(h, lines);
    expect(body.subarray(whole.length).toString('latin1')).toMatch(/^#end 3 \d+ [0-9a-f]{16}\n$/);
    expect(mirrored(body)).toEqual(whole);
    // A batch of no lines is its trailer alone.
    expect(mirrored(encodeBatch(h, []))).toEqual(Buffer.alloc(0));
  });

  it('a batch cut at a line boundary keeps its lines and gains one line no reader trusts', () => {
    expect(mirrored(whole)).toEqual(Buffer.concat([whole, PARTIAL_BATCH_LINE]));
    expect(mirrored(Buffer.alloc(0))).toEqual(PARTIAL_BATCH_LINE);
    // A last line longer than any trailer cannot be one.
    const long = Buffer.from(frameLine(h, JSON.stringify({ type: 'session.revert', before: 'x'.repeat(500) })));
    expect(mirrored(long)).toEqual(Buffer.concat([long, PARTIAL_BATCH_LINE]));
  });

  it('a batch cut inside a line ends that torn line, so the next batch starts on a line of its own', () => {
    const cut = encodeBatch(h, lines).subarray(0, whole.length + 7);
    expect(mirrored(cut)).toEqual(Buffer.concat([cut, Buffer.from('\n')]));
    const midLine = whole.subarray(0, whole.length - 10);
    expect(mirrored(midLine)).toEqual(Buffer.concat([midLine, Buffer.from('\n')]));
  });

  it('a damaged trailer stays in as a corrupt line; a trailer that does not match the length is damaged', () => {
    const body = encodeBatch(h, lines);
    const flipped = Buffer.from(body);
    flipped[body.length - 3] = (flipped[body.length - 3] as number) ^ 0x01;
    expect(mirrored(flipped)).toEqual(flipped);
    // A line lost from the middle: the trailer's length no longer fits.
    const missing = Buffer.concat([lines[0] as Buffer, body.subarray((lines[0] as Buffer).length * 2)]);
    expect(mirrored(missing)).toEqual(missing);
  });

  it('numbers keys with 12 zero-padded digits under the session prefix, and reads them back', () => {
    expect(batchKey(s3, 'sess', 42)).toBe('p/q/sessions/sess/000000000042');
    const prefix = sessionPrefix(s3, 'sess');
    expect(seqOfKey(prefix, batchKey(s3, 'sess', 987_654_321_012))).toBe(987_654_321_012);
    expect(seqOfKey(prefix, `${prefix}lease`)).toBeUndefined();
    expect(seqOfKey(prefix, `${prefix}00000000001`)).toBeUndefined();
    expect(seqOfKey(prefix, 'p/q/sessions/other/000000000001')).toBeUndefined();
  });
});
