/**
 * Capture is byte-exact: a stream's artifact holds exactly the bytes the
 * tool wrote (bash's pipes unchanged, invalid UTF-8, binary data and output
 * cut mid-character included), its digest is what `sha256sum` says of the
 * same bytes, and sizes in metadata, display and output refs agree. Text is
 * decoded only where it is shown (U+FFFD in the model view), and a JS
 * string, which is UTF-16, is stored as its UTF-8 encoding.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { closeEngines, engineWith, expectStoreClean, readBlob, sha256 } from '../support/engines.js';

const run = promisify(execFile);

afterEach(closeEngines);

const GRIN = '\u{1F600}'; // 😀, f0 9f 98 80
const FFFD = '\uFFFD';

/** The bytes of each stream of a named-output result (small outputs only). */
async function rawStreams(
  engine: Parameters<typeof readBlob>[0],
  r: { output: unknown },
): Promise<Record<string, Buffer>> {
  const out = r.output as { kind: string; streams: Array<{ name: string; digest: string }> };
  if (out?.kind !== 'streams') throw new Error(`expected named streams, got ${JSON.stringify(out)}`);
  const bytes: Record<string, Buffer> = {};
  for (const s of out.streams) bytes[s.name] = await readBlob(engine, s.digest);
  return bytes;
}

/** `sha256sum` of what `command` writes to stdout, computed by coreutils. */
async function sha256sumOf(command: string, cwd: string): Promise<string> {
  const { stdout } = await run('bash', ['-c', `(${command}) | sha256sum`], { cwd });
  return stdout.split(' ')[0] as string;
}

describe('bash output is stored exactly as the process wrote it', () => {
  it('an incomplete character at the end is kept as its bytes: 4 bytes, their digest, 4 in metadata and display', async () => {
    const { engine } = await engineWith([]);
    const r = await engine.run('bash', { command: 'printf "ab\\xe2\\x82"' });
    expect(r.status).toBe('success');
    const expected = Buffer.from([0x61, 0x62, 0xe2, 0x82]);
    expect((await rawStreams(engine, r)).stdout).toEqual(expected);
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    expect(r.output.streams[0]).toMatchObject({ name: 'stdout', digest: sha256(expected), bytes: 4, lines: 1 });
    expect(r.metadata).toMatchObject({ stdoutBytes: 4, stderrBytes: 0 });
    expect(r.display).toContain('stdout 4 B');
    // Shown as text: the incomplete sequence decodes to one U+FFFD in the view, never in the artifact.
    expect(r.model).toBe(`[stdout]\nab${FFFD}\n\n[stderr]\n(empty)\n`);
    await expectStoreClean(engine);
  });

  it('100,000 random bytes are stored as 100,000 bytes with the digest sha256sum computes', async () => {
    const { engine, dir } = await engineWith([]);
    await run('bash', ['-c', 'head -c 100000 /dev/urandom > random.bin'], { cwd: dir });
    const r = await engine.run('bash', { command: 'cat random.bin; cat random.bin >&2' });
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const expected = await sha256sumOf('cat random.bin', dir);
    expect(r.output.streams.map((s) => [s.name, s.bytes, s.digest])).toEqual([
      ['stdout', 100000, expected],
      ['stderr', 100000, expected],
    ]);
    expect(r.metadata).toMatchObject({ stdoutBytes: 100000, stderrBytes: 100000 });
    expect(await readBlob(engine, expected)).toEqual(await fsp.readFile(join(dir, 'random.bin')));
    await expectStoreClean(engine);
  });

  it('output cut mid-character by head -c has the digest of the same command run without sluice', async () => {
    const { engine, dir } = await engineWith([]);
    // 22-byte lines; 3,000,001 bytes end inside the € of the last line, and pipe reads end anywhere.
    const command = "yes 'hello wörld € 😀' | head -c 3000001";
    const r = await engine.run('bash', { command });
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    expect(r.output.streams[0]).toMatchObject({ bytes: 3000001, digest: await sha256sumOf(command, dir) });
    expect(r.metadata).toMatchObject({ stdoutBytes: 3000001 });
    await expectStoreClean(engine);
  });

  it('a 4-byte character split across two writes with a pause between them is stored whole', async () => {
    const { engine } = await engineWith([]);
    const r = await engine.run('bash', { command: "printf '\\xf0\\x9f'; sleep 0.2; printf '\\x98\\x80\\n'" });
    expect((await rawStreams(engine, r)).stdout).toEqual(Buffer.from([0xf0, 0x9f, 0x98, 0x80, 0x0a]));
    expect(r.model).toContain(`[stdout]\n${GRIN}\n`);
  });

  it('invalid bytes and a character cut off at the end stay in the artifact; the view shows U+FFFD', async () => {
    const { engine } = await engineWith([]);
    const r = await engine.run('bash', { command: "printf 'a\\xffb\\n'; printf 'x\\xf0\\x9f' >&2" });
    expect(await rawStreams(engine, r)).toEqual({
      stdout: Buffer.from([0x61, 0xff, 0x62, 0x0a]),
      stderr: Buffer.from([0x78, 0xf0, 0x9f]),
    });
    expect(r.model).toBe(`[stdout]\na${FFFD}b\n\n[stderr]\nx${FFFD}\n`);
  });

  it('the same bytes split differently by the pipe give the same digest', async () => {
    const { engine } = await engineWith([]);
    const whole = await engine.run('bash', { command: "for i in $(seq 1 3000); do printf '€'; done" });
    const pieces = await engine.run('bash', {
      command: "for i in $(seq 1 3000); do printf '\\xe2'; printf '\\x82\\xac'; done",
    });
    const expected = sha256('€'.repeat(3000));
    expect(whole.output?.kind === 'streams' && whole.output.streams[0]?.digest).toBe(expected);
    expect(pieces.output?.kind === 'streams' && pieces.output.streams[0]?.digest).toBe(expected);
  });
});

describe('JS tools: bytes as given, strings as UTF-8', () => {
  it('Buffer writes are stored exactly, invalid bytes and split characters included', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const parts = [[0x41, 0xff, 0xf0, 0x9f], [0x98], [0x80, 0x42, 0xc3]];
    const r = await engine.run('utf8-split', { parts });
    const expected = Buffer.from(parts.flat());
    expect(r.output).toMatchObject({ kind: 'single', bytes: 8, digest: sha256(expected) });
    expect(await readBlob(engine, sha256(expected))).toEqual(expected);
    expect(r.model).toBe(`A${FFFD}${GRIN}B${FFFD}`);
    await expectStoreClean(engine);
  });

  it('half a surrogate pair per write is joined into one character', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const r = await engine.run('utf8-split', { parts: ['a\uD83D', '\uDE00b'] });
    expect(r.output).toMatchObject({ bytes: 6, digest: sha256(`a${GRIN}b`) });
  });

  it('a lone surrogate has no UTF-8 form and is stored as U+FFFD, also before a Buffer write', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const end = await engine.run('utf8-split', { parts: ['x', 'y\uD83D'] });
    expect(end.output).toMatchObject({ digest: sha256(`xy${FFFD}`) });
    const low = await engine.run('utf8-split', { parts: ['\uDE00z'] });
    expect(low.output).toMatchObject({ digest: sha256(`${FFFD}z`) });
    const mixed = await engine.run('utf8-split', { parts: ['a\uD83D', [0xff]] });
    expect(mixed.output).toMatchObject({
      digest: sha256(Buffer.concat([Buffer.from(`a${FFFD}`), Buffer.from([0xff])])),
    });
  });

  it('a tool reusing its buffer after each write loses nothing', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const r = await engine.run('utf8-split', {
      parts: [
        [0x41, 0xf0, 0x9f],
        [0x98, 0x80, 0x42],
      ],
      reuse: true,
      gapMs: 0,
    });
    expect(r.output).toMatchObject({ digest: sha256(`A${GRIN}B`) });
    expect(r.metadata).toEqual({ lengthsAfter: [3, 3] });
  });

  it('handed-over buffers move to the engine uncopied and arrive intact, even ending inside a character', async () => {
    const { engine } = await engineWith(['utf8-split']);
    const r = await engine.run('utf8-split', {
      parts: [[0x41, 0xf0, 0x9f], [0x98, 0x80, 0x42], Array.from(Buffer.from('tail\n'))],
      handOver: true,
    });
    expect(r.output).toMatchObject({ digest: sha256(`A${GRIN}Btail\n`) });
    // Nothing is held back any more: every handed-over buffer moved (its view is empty afterwards).
    expect(r.metadata).toEqual({ lengthsAfter: [0, 0, 0] });
    await expectStoreClean(engine);
  });

  it("a tool's handed-over view over part of its buffer is copied: its other views stay whole", async () => {
    const { engine } = await engineWith(['utf8-split']);
    const parts = [Array.from(Buffer.from('half-full:')), Array.from(Buffer.from('mostly spare\n'))];
    // 10 bytes in 20 and 13 in 113: both copied (the view keeps its length).
    const half = await engine.run('utf8-split', { parts: parts.slice(0, 1), handOver: true, spare: 10 });
    expect(half.output).toMatchObject({ digest: sha256('half-full:') });
    expect(half.metadata).toEqual({ lengthsAfter: [10] });
    const little = await engine.run('utf8-split', { parts: parts.slice(1), handOver: true, spare: 100 });
    expect(little.output).toMatchObject({ digest: sha256('mostly spare\n') });
    expect(little.metadata).toEqual({ lengthsAfter: [13] });
    await expectStoreClean(engine);
  });

  it('one large string write is split on the wire and stored exactly', async () => {
    const { engine } = await engineWith(['utf8-split']);
    // A 4-byte character straddling every 256 KiB message boundary (a quarter of the default window).
    const text = `${'a'.repeat(262142)}${GRIN}`.repeat(3);
    const r = await engine.run('utf8-split', { parts: [text] });
    expect(r.output).toMatchObject({ bytes: Buffer.byteLength(text), digest: sha256(text) });
    await expectStoreClean(engine);
  });

  it('writes batched together keep their order, long and short strings and bytes mixed, pairs split between them', async () => {
    const { engine } = await engineWith(['burst-writes']);
    // Regression: long strings in a batch were encoded after the short parts around them, so the
    // surrogate carry met them out of order (a pair split across writes became two U+FFFD, moved).
    const parts = [
      { text: 'y\uD83D' },
      { text: '\uDE00L', times: 150_000 },
      { bytes: [0x5a, 0xff] },
      { text: 'a\uD83D' },
      { text: '\uDE00'.concat('b'.repeat(100_000)) },
      { text: 'tail\n' },
    ];
    const r = await engine.run('burst-writes', { parts });
    const expected = Buffer.concat([
      Buffer.from(`y${'\uD83D\uDE00L'.repeat(1)}${'\uDE00L'.repeat(149_999)}`),
      Buffer.from([0x5a, 0xff]),
      Buffer.from(`a\u{1F600}${'b'.repeat(100_000)}tail\n`),
    ]);
    expect(r.output).toMatchObject({ kind: 'single', bytes: expected.length, digest: sha256(expected) });
    await expectStoreClean(engine);
  });
});
