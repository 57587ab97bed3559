/**
 * UTF-8 across writes and chunks: a character split between two writes (bash
 * reads, JS Buffers, or the two halves of a surrogate pair) is stored whole;
 * invalid bytes and dangling halves become U+FFFD; the wire split
 * never cuts a character.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeEngines, engineWith, expectStoreClean, readBlob, sha256, singleText, streamBytes } from './helpers.js';

afterEach(closeEngines);

const GRIN = '\u{1F600}'; // 😀, f0 9f 98 80
const FFFD = '\uFFFD';

describe('UTF-8 in bash output', () => {
  it('a 4-byte character split across two writes with a pause between them is stored whole', async () => {
    const { engine } = await engineWith([]);
    const r = await engine.run('bash', { command: "printf '\\xf0\\x9f'; sleep 0.2; printf '\\x98\\x80\\n'" });
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    expect(await readBlob(engine, r.output.streams[0]?.digest as string)).toEqual(
      Buffer.from([0xf0, 0x9f, 0x98, 0x80, 0x0a]),
    );
    expect(r.model).toContain(`[stdout]\n${GRIN}\n`);
  });

  it('invalid bytes become U+FFFD, and a character cut off at the end becomes one U+FFFD', async () => {
    const { engine } = await engineWith([]);
    const r = await engine.run('bash', { command: "printf 'a\\xffb\\n'; printf 'x\\xf0\\x9f' >&2" });
    expect(await streamBytes(engine, r)).toEqual({ stdout: `a${FFFD}b\n`, stderr: `x${FFFD}` });
  });

  it('the same bytes split differently by the pipe give the same digest', async () => {
    const { engine } = await engineWith([]);
    // 3-byte characters (€) written in odd-sized pieces, so pipe reads end inside characters.
    const whole = await engine.run('bash', { command: "for i in $(seq 1 3000); do printf '€'; done" });
    const pieces = await engine.run('bash', {
      command: "for i in $(seq 1 3000); do printf '\\xe2'; printf '\\x82\\xac'; done",
    });
    const expected = sha256('€'.repeat(3000));
    expect(whole.output?.kind === 'streams' && whole.output.streams[0]?.digest).toBe(expected);
    expect(pieces.output?.kind === 'streams' && pieces.output.streams[0]?.digest).toBe(expected);
  });
});

describe('UTF-8 from JS tools', () => {
  it('half a surrogate pair per write is joined into one character', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const r = await engine.run('utf8-split', { parts: ['a\uD83D', '\uDE00b'] });
    expect(r.status).toBe('success');
    expect(await singleText(engine, r)).toBe(`a${GRIN}b`);
    expect(r.output).toMatchObject({ bytes: 6, digest: sha256(`a${GRIN}b`) });
  });

  it('a lone high surrogate at the end and a lone low surrogate become U+FFFD', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const end = await engine.run('utf8-split', { parts: ['x', 'y\uD83D'] });
    expect(await singleText(engine, end)).toBe(`xy${FFFD}`);
    const low = await engine.run('utf8-split', { parts: ['\uDE00z'] });
    expect(await singleText(engine, low)).toBe(`${FFFD}z`);
  });

  it('a character split across Buffer writes is stored whole; a string write after a dangling byte flushes it as U+FFFD', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const split = await engine.run('utf8-split', { parts: [[0x41, 0xf0, 0x9f], [0x98], [0x80, 0x42]] });
    expect(await singleText(engine, split)).toBe(`A${GRIN}B`);
    const dangling = await engine.run('utf8-split', { parts: [[0xe2, 0x82], 'text'] });
    expect(await singleText(engine, dangling)).toBe(`${FFFD}text`);
  });

  it('a tool reusing its buffer after each write loses nothing, even with a character held back between writes', async () => {
    const { engine } = await engineWith(['utf8-split']);
    // Regression: the held-back start of a character was a view into the tool's buffer, so
    // overwriting that buffer after the write's callback changed bytes not yet sent.
    const r = await engine.run('utf8-split', {
      parts: [
        [0x41, 0xf0, 0x9f],
        [0x98, 0x80, 0x42],
      ],
      reuse: true,
      gapMs: 0,
    });
    expect(await singleText(engine, r)).toBe(`A${GRIN}B`);
    expect(r.metadata).toEqual({ lengthsAfter: [3, 3] });
  });

  it('handed-over buffers move to the engine uncopied and arrive intact, a split character included', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const r = await engine.run('utf8-split', {
      parts: [[0x41, 0xf0, 0x9f], [0x98, 0x80, 0x42], Array.from(Buffer.from('tail\n'))],
      handOver: true,
    });
    expect(await singleText(engine, r)).toBe(`A${GRIN}Btail\n`);
    // The third buffer moved (its view is empty afterwards). The first two did not: the first ends inside
    // a character, so only one byte of it can go (copied), and the second is joined to those held-back bytes.
    expect(r.metadata).toEqual({ lengthsAfter: [3, 3, 0] });
    await expectStoreClean(engine);
  });

  it('the wire split never cuts a character', async () => {
    const { engine } = await engineWith(['utf8-split']);
    // One write of 3 × 256 KiB + change with a 4-byte character straddling every 256 KiB boundary
    // (messages are a quarter of the default 1 MiB window).
    const text = `${'a'.repeat(262142)}${GRIN}`.repeat(3);
    const r = await engine.run('utf8-split', { parts: [text] });
    expect(r.output).toMatchObject({ bytes: Buffer.byteLength(text), digest: sha256(text) });
    await expectStoreClean(engine);
  });
});
