/**
 * Capture failures owned by the runtime: ENOSPC and EIO injected into the
 * store's filesystem calls fail the call with EDISK; a write that fails keeps
 * the prefix already written to the capture file (published as incomplete,
 * its totals what was kept, the error saying what was accepted), a failure
 * that leaves nothing durable publishes nothing and says so; tmp/ is empty
 * either way. A stream passing maxStreamBytes fails with ESIZELIMIT and
 * publishes the accepted prefix as incomplete. A real full disk is
 * test/call/full-disk.test.ts.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { realIO, type StoreFile, type StoreIO } from '../../store/io.js';
import { MANIFEST_KIND } from '../../store/manifest.js';
import {
  closeEngines,
  engineWith,
  expectPoolServes,
  expectPublished,
  expectStoreClean,
  floodDigest,
  sha256,
  sleep,
  streamBytes,
  uniqueSleep,
  waitNoProcess,
} from '../support/engines.js';

afterEach(closeEngines);

function fsError(code: string, syscall: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: injected fault, ${syscall}`), { code, syscall, errno: -1 });
}

/** A capture file: the faults below hit only these, not the store's reserve, pins or packs. */
const CAPTURE_FILE = /\/tmp\/[^/]+\.blob$/;

/**
 * realIO whose `op` fails with `errno` on its `n`th call on a capture file
 * (and only then): opens are counted by path, the rest by the file opened.
 */
function failNth(op: 'write' | 'fsync' | 'open', n: number, errno: string): StoreIO {
  let calls = 0;
  const captures = new WeakSet<StoreFile>();
  const hit = () => ++calls === n;
  return {
    ...realIO,
    open: async (path, flags, mode) => {
      if (CAPTURE_FILE.test(path) && op === 'open' && hit()) throw fsError(errno, 'open');
      const fh = await realIO.open(path, flags, mode);
      if (CAPTURE_FILE.test(path)) captures.add(fh);
      return fh;
    },
    write: (fh, buf, off, len, position) =>
      op === 'write' && captures.has(fh) && hit()
        ? Promise.reject(fsError(errno, 'write'))
        : realIO.write(fh, buf, off, len, position),
    writev: (fh, bufs, position) =>
      op === 'write' && captures.has(fh) && hit()
        ? Promise.reject(fsError(errno, 'writev'))
        : realIO.writev(fh, bufs, position),
    fsync: (fh) =>
      op === 'fsync' && captures.has(fh) && hit() ? Promise.reject(fsError(errno, 'fsync')) : realIO.fsync(fh),
  };
}

/** realIO whose writes fail with `errno` when the bytes written contain `marker` (latin1). */
function failWriteOf(marker: string, errno: string): StoreIO {
  const has = (b: NodeJS.ArrayBufferView) =>
    Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1').includes(marker);
  return {
    ...realIO,
    write: (fh, buf, off, len, position) =>
      has(buf) ? Promise.reject(fsError(errno, 'write')) : realIO.write(fh, buf, off, len, position),
    writev: (fh, bufs, position) =>
      bufs.some(has) ? Promise.reject(fsError(errno, 'writev')) : realIO.writev(fh, bufs, position),
  };
}

/**
 * realIO whose capture-file writes (write or writev, however the capture
 * batches them) fail with `errno` once `bytes` have been written to capture
 * files: their disk is full there, whatever the timing of the chunks.
 */
function fullAfter(bytes: number, errno: string): StoreIO {
  let written = 0;
  const captures = new WeakSet<StoreFile>();
  const check = (fh: StoreFile, n: number, op: string) => {
    if (!captures.has(fh)) return undefined;
    if (written >= bytes) return Promise.reject(fsError(errno, op));
    written += n;
    return undefined;
  };
  return {
    ...realIO,
    open: async (path, flags, mode) => {
      const fh = await realIO.open(path, flags, mode);
      if (CAPTURE_FILE.test(path)) captures.add(fh);
      return fh;
    },
    write: (fh, buf, off, len, position) => check(fh, len, 'write') ?? realIO.write(fh, buf, off, len, position),
    writev: (fh, bufs, position) =>
      check(
        fh,
        bufs.reduce((n, b) => n + b.length, 0),
        'writev',
      ) ?? realIO.writev(fh, bufs, position),
  };
}

describe('injected disk faults', () => {
  it.each([
    ['ENOSPC', failNth('write', 5, 'ENOSPC')],
    ['EIO', failNth('write', 5, 'EIO')],
  ])(
    '%s in a write in the middle of the capture fails EDISK and keeps the prefix written before it',
    async (errno, io) => {
      const { engine } = await engineWith(['flood'], { window: 128 * 1024, io });
      const r = await engine.run('flood', { bytes: 2 * 1024 * 1024 });
      expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EDISK' } });
      expect(r.error?.details).toMatchObject({ errno });
      if (r.output?.kind !== 'single') throw new Error(`expected a single output, got ${JSON.stringify(r.output)}`);
      // Four writes reached the file: the kept output is exactly the first bytes the tool wrote, in order.
      const accepted =
        (r.error?.details as { accepted?: Array<{ stream: string; bytes: number }> } | undefined)?.accepted ?? [];
      expect(accepted).toHaveLength(1);
      expect(accepted[0]?.stream).toBe('output');
      expect(r.output.bytes).toBeGreaterThanOrEqual(4 * 1024);
      expect(r.output.bytes).toBeLessThan(accepted[0]?.bytes as number);
      expect(r.output.digest).toBe(floodDigest(r.output.bytes, 65536));
      await expectPublished(engine, r.output);
      expect(r.model).toContain(`artifact://${r.output.digest}`);
      expect(r.display).toMatch(
        /\nKept \(incomplete\): output \S+ \S+ in \d+ lines? of \S+ \S+ accepted; the rest could not be stored$/,
      );
      await expectStoreClean(engine);
      await expectPoolServes(engine);
    },
  );

  it.each([
    ['ENOSPC', 'creating the capture file', failNth('open', 1, 'ENOSPC')],
    ['EIO', 'the fsync before publication', failNth('fsync', 1, 'EIO')],
  ])('%s in %s fails the call with EDISK, publishes nothing and leaves tmp/ empty', async (errno, _where, io) => {
    const { engine } = await engineWith(['flood'], { window: 128 * 1024, io });
    const r = await engine.run('flood', { bytes: 2 * 1024 * 1024 });
    expect(r).toMatchObject({ status: 'failed', complete: false, output: null, error: { code: 'EDISK' } });
    expect(r.error?.details).toMatchObject({ errno });
    expect(r.model).toContain('EDISK');
    // Nothing was kept, so the display claims nothing: no size of bytes that no artifact holds.
    expect(r.display).toMatch(/\nKept: nothing \(the output could not be stored\)$/);
    expect(r.display).not.toContain('Captured');
    await expectStoreClean(engine);
    await expectPoolServes(engine);
  });

  it('bash output that fills the disk mid-capture (seq 1 1000000) fails EDISK and keeps the first MiB', async () => {
    // The disk fills after 1 MiB of the 6.9 MB the command writes.
    const { engine } = await engineWith([], { io: fullAfter(1024 * 1024, 'ENOSPC') });
    const r = await engine.run('bash', { command: 'seq 1 1000000' });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EDISK' } });
    if (r.output?.kind !== 'streams') throw new Error(`expected streams, got ${JSON.stringify(r.output)}`);
    const [stdout, stderr] = r.output.streams;
    expect(stdout?.bytes).toBeGreaterThanOrEqual(1024 * 1024);
    expect(stdout?.bytes).toBeLessThan(6_888_896);
    const seq = Array.from({ length: 1_000_000 }, (_, i) => `${i + 1}\n`).join('');
    expect(stdout?.digest).toBe(sha256(seq.slice(0, stdout?.bytes)));
    expect(stdout?.lines).toBe(
      seq.slice(0, stdout?.bytes).split('\n').length - (seq[(stdout?.bytes as number) - 1] === '\n' ? 1 : 0),
    );
    expect(stderr).toMatchObject({ bytes: 0, digest: sha256('') });
    expect(r.display).toContain('Kept (incomplete): stdout ');
    expect(r.model).toMatch(/^\[stdout\]\n1\n2\n3\n/);
    await expectPublished(engine, r.output);
    await expectStoreClean(engine);
  });

  // Regression: after a capture failure the engine kept every later chunk's credit, so a tool blocked in
  // write() could never see its abort and every such call waited out graceMs and lost its worker.
  it.each([
    ['EDISK', { io: failNth('write', 3, 'ENOSPC') }],
    ['ESIZELIMIT', { maxStreamBytes: 100_000 }],
  ])(
    'after %s a producer blocked on credit is released and stops on its own, well before graceMs',
    async (code, opts) => {
      const { engine } = await engineWith(['flood'], { window: 128 * 1024, graceMs: 60_000, ...opts });
      const r = await engine.run('flood', { bytes: 64 * 1024 * 1024 });
      expect(r).toMatchObject({ status: 'failed', complete: false, error: { code } });
      await expectStoreClean(engine);
    },
  );

  it('EIO while capturing bash output fails with EDISK, kills the command and keeps only what was written', async () => {
    const sleeper = uniqueSleep();
    // A long grace period: bash must stop through its abort, not by losing its worker.
    const { engine } = await engineWith([], { io: failNth('write', 3, 'EIO'), graceMs: 60_000 });
    const r = await engine.run('bash', {
      command: `${sleeper.command} & yes 0123456789 | head -c 8388608; wait`,
    });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EDISK' } });
    if (r.output?.kind !== 'streams') throw new Error(`expected streams, got ${JSON.stringify(r.output)}`);
    const stdout = r.output.streams[0];
    expect(stdout?.bytes).toBeLessThan(8388608);
    expect(stdout?.digest).toBe(sha256('0123456789\n'.repeat(Math.ceil(8388608 / 11)).slice(0, stdout?.bytes)));
    await expectStoreClean(engine);
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectPoolServes(engine);
  });

  it('ENOSPC while publishing the manifest of named streams fails with EDISK and output null', async () => {
    // The write carrying the manifest, whether to its own file or to the pack: the streams are stored by then.
    const { engine } = await engineWith([], { io: failWriteOf(MANIFEST_KIND, 'ENOSPC') });
    const r = await engine.run('bash', { command: 'echo out; echo err >&2' });
    expect(r).toMatchObject({ status: 'failed', complete: false, output: null, error: { code: 'EDISK' } });
    await expectStoreClean(engine);
  });
});

describe('size bound', () => {
  it('a stream passing maxStreamBytes fails with ESIZELIMIT and publishes the accepted prefix', async () => {
    const bound = 100_000;
    const { engine } = await engineWith(['flood'], { maxStreamBytes: bound });
    const r = await engine.run('flood', { bytes: 1024 * 1024 });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'ESIZELIMIT' } });
    if (r.output?.kind !== 'single') throw new Error('expected single output');
    expect(r.output.bytes).toBeGreaterThan(0);
    expect(r.output.bytes).toBeLessThanOrEqual(bound);
    // The prefix is exactly the first bytes the tool wrote, in order.
    expect(r.output.digest).toBe(floodDigest(r.output.bytes, 65536));
    await expectPublished(engine, r.output);
    await expectStoreClean(engine);
    await expectPoolServes(engine);
  });

  it('the bound applies per stream: bash stdout passes it, stderr is kept whole', async () => {
    const sleeper = uniqueSleep();
    const bound = 200_000;
    // The test waits for stderr's capture file, which a packed (small) stream never has.
    process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';
    const { engine, dir } = await engineWith([], { maxStreamBytes: bound, graceMs: 60_000 }).finally(() => {
      delete process.env.SLUICE_PACK_MAX_BLOB_BYTES;
    });
    // stdout passes its bound only once stderr is in its capture file: a failed call keeps what it
    // accepted and drops what arrives later, and the two pipes are read in no particular order.
    const go = join(dir, 'go');
    const call = engine.run('bash', {
      command: `echo diagnostics >&2; while [ ! -e ${go} ]; do sleep 0.01; done; ${sleeper.command} & yes 0123456789 | head -c 4194304; wait`,
    });
    for (;;) {
      const sizes = await Promise.all(
        (await fsp.readdir(engine.store.layout.tmp)).map((n) =>
          fsp.stat(join(engine.store.layout.tmp, n)).then(
            (s) => s.size,
            () => 0,
          ),
        ),
      );
      if (sizes.includes(12)) break;
      await sleep(10);
    }
    await fsp.writeFile(go, '');
    const r = await call;
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'ESIZELIMIT' } });
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const [stdout, stderr] = r.output.streams;
    expect(stdout?.bytes).toBeLessThanOrEqual(bound);
    expect(stdout?.digest).toBe(sha256('0123456789\n'.repeat(Math.ceil(bound / 11)).slice(0, stdout?.bytes)));
    expect(stderr).toMatchObject({ bytes: 12, digest: sha256('diagnostics\n') });
    await expectPublished(engine, r.output);
    await expectStoreClean(engine);
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    expect((await streamBytes(engine, r)).stderr).toBe('diagnostics\n');
  });
});
