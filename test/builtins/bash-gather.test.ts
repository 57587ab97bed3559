/**
 * bash gathers its pipe reads into message-sized writes (workers/pipe-gather.ts):
 * bytes still arrive exactly, in order, whatever the reads' sizes; output that
 * trickles reaches the engine while the command still runs (it is not held
 * until more comes); a pipe that ended before it is read from still ends the
 * call; a write error destroys both sides and leaves no process behind.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { PipeGather } from '../../workers/pipe-gather.js';
import { takeHandedOver } from '../../workers/transfer.js';
import { closeEngines, engineWith, expectStoreClean, readBlob, waitNoProcess } from '../support/engines.js';

afterEach(closeEngines);

/** A writer that records each write's size and the bytes' SHA-256, like a stream writer of `hwm` bytes per message. */
function recorder(hwm: number, fail?: Error): Writable & { sizes: number[]; digest(): string } {
  const hash = createHash('sha256');
  const sizes: number[] = [];
  const w = new Writable({
    highWaterMark: hwm,
    write(chunk: Buffer, _e, cb) {
      if (fail) return cb(fail);
      sizes.push(chunk.length);
      hash.update(chunk);
      setImmediate(cb);
    },
  });
  return Object.assign(w, { sizes, digest: () => hash.digest('hex') });
}

/** A writer of `hwm` bytes per message that keeps each chunk it is given, as given. */
function collector(hwm: number): { dst: Writable; chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  const dst = new Writable({
    highWaterMark: hwm,
    write(chunk: Buffer, _e, cb) {
      chunks.push(chunk);
      cb();
    },
  });
  return { dst, chunks };
}

function childOut(command: string) {
  const child = spawn('bash', ['-c', command], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { stdout: child.stdout, exited };
}

describe('PipeGather', () => {
  it('writes a pipe byte for byte in writes of at most the writer size', async () => {
    const command = 'seq 1 300000; printf tail-without-newline';
    const want = createHash('sha256');
    for await (const c of childOut(command).stdout) want.update(c as Buffer);
    const { stdout } = childOut(command);
    const dst = recorder(256 * 1024);
    const reads: number[] = [];
    const g = new PipeGather(stdout, dst, (c) => reads.push(c.length));
    await g.done;
    const total = reads.reduce((a, b) => a + b, 0);
    expect(g.bytes).toBe(total);
    expect(dst.sizes.reduce((a, b) => a + b, 0)).toBe(total);
    expect(dst.digest()).toBe(want.digest('hex'));
    // Never more writes than reads, each at most the writer's size. (How many reads are combined depends
    // on their sizes, which a loaded machine makes 64 KiB, each then a write of its own: the PassThrough
    // tests below pin the gathering down.)
    expect(dst.sizes.length).toBeLessThanOrEqual(reads.length);
    expect(Math.max(...dst.sizes)).toBeLessThanOrEqual(256 * 1024);
  });

  it('reads gathered together move as one buffer of exactly their size, a lone read as it is', async () => {
    // Reads of a quarter message each: gathered, then written by the timer (4500 of 8192), then the last alone.
    const src = new PassThrough();
    let next: (() => void) | undefined;
    const flushed = new Promise<void>((r) => {
      next = r;
    });
    const writes: Array<[number, boolean, number]> = [];
    const chunks: Buffer[] = [];
    const dst = new Writable({
      highWaterMark: 8192,
      write(chunk: Buffer, _e, cb) {
        writes.push([chunk.length, takeHandedOver(chunk), chunk.buffer.byteLength]);
        chunks.push(chunk);
        next?.();
        cb();
      },
    });
    const g = new PipeGather(src, dst, () => {});
    src.write(Buffer.alloc(2000, 1));
    src.write(Buffer.alloc(2500, 2));
    await flushed;
    const last = Buffer.alloc(1000, 3);
    src.end(last);
    await g.done;
    expect(writes).toEqual([
      [4500, true, 4500],
      [1000, true, 1000],
    ]);
    // The lone read is the very buffer that was read, not a copy of it.
    expect(chunks[1]).toBe(last);
    expect(src.destroyed).toBe(true);
  });

  it('a small output costs no message-sized buffer: its one read is written as it is', async () => {
    const src = new PassThrough();
    const { dst, chunks: written } = collector(256 * 1024);
    const g = new PipeGather(src, dst, () => {});
    // A whole buffer of its own, as a pipe read is.
    const read = Buffer.from(new TextEncoder().encode('a short line of output\n').buffer);
    src.end(read);
    await g.done;
    expect(written).toHaveLength(1);
    // The very buffer that was read, marked to move: nothing was allocated or copied for it.
    expect(written[0]).toBe(read);
    expect(takeHandedOver(read)).toBe(true);
  });

  it('gathered reads go out before a read would take them past a message, in order', async () => {
    const src = new PassThrough();
    const writes: Array<[number, number]> = [];
    const dst = new Writable({
      highWaterMark: 8192,
      write(chunk: Buffer, _e, cb) {
        writes.push([chunk.length, chunk[0] as number]);
        cb();
      },
    });
    const g = new PipeGather(src, dst, () => {});
    // 3000 + 3000 gathered; 3000 more would pass 8192: the first two go, the third starts the next write.
    src.write(Buffer.alloc(3000, 1));
    src.write(Buffer.alloc(3000, 2));
    src.write(Buffer.alloc(3000, 3));
    src.end(Buffer.alloc(5192, 4));
    await g.done;
    expect(writes).toEqual([
      [6000, 1],
      [8192, 3],
    ]);
  });

  it('a read of 32 KiB or more that finds nothing gathered goes uncopied as a message of its own', async () => {
    const src = new PassThrough();
    const writes: Array<[number, boolean, number]> = [];
    const chunks: Buffer[] = [];
    const dst = new Writable({
      highWaterMark: 256 * 1024,
      write(chunk: Buffer, _e, cb) {
        writes.push([chunk.length, takeHandedOver(chunk), chunk[0] as number]);
        chunks.push(chunk);
        cb();
      },
    });
    const g = new PipeGather(src, dst, () => {});
    // Each a whole buffer of its own, as a pipe read is.
    const big = Buffer.alloc(40 * 1024, 1);
    src.write(big); // alone: moved as it is
    src.write(Buffer.alloc(32 * 1024 - 1, 2)); // just under: gathered
    src.write(Buffer.alloc(40 * 1024, 3)); // after gathered bytes: gathered behind them, in order
    src.end();
    await g.done;
    expect(writes).toEqual([
      [40 * 1024, true, 1],
      [72 * 1024 - 1, true, 2],
    ]);
    expect(chunks[0]).toBe(big);
  });

  it('a read past a message while bytes are gathered writes them first, then goes alone as it is', async () => {
    const src = new PassThrough();
    const { dst, chunks } = collector(8192);
    const g = new PipeGather(src, dst, () => {});
    const small = Buffer.alloc(3000, 1);
    const large = Buffer.alloc(10000, 2);
    src.write(small);
    src.end(large);
    await g.done;
    expect(chunks.map((c) => c.length)).toEqual([3000, 10000]);
    expect(chunks[0]).toBe(small);
    expect(chunks[1]).toBe(large);
  });

  it('a trickle of one-byte reads is written every 64 reads at most, every byte in order', async () => {
    const src = new PassThrough();
    const { dst, chunks: writes } = collector(256 * 1024);
    const g = new PipeGather(src, dst, () => {});
    // All pushed in one turn: the 2 ms timer cannot fire in between, so only the read cap splits them.
    for (let i = 0; i < 200; i++) src.write(Buffer.from([i]));
    src.end();
    await g.done;
    expect(writes.map((w) => w.length)).toEqual([64, 64, 64, 8]);
    expect([...Buffer.concat(writes)]).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });

  it("a child's pipe is read straight into message buffers: each full one moves as it is, every byte in order", async () => {
    const command = 'seq 1 2000000';
    const want = createHash('sha256');
    for await (const c of childOut(command).stdout) want.update(c as Buffer);
    const { stdout } = childOut(command);
    const hash = createHash('sha256');
    const writes: Array<[number, boolean, number]> = [];
    const dst = new Writable({
      highWaterMark: 64 * 1024,
      write(chunk: Buffer, _e, cb) {
        writes.push([chunk.length, takeHandedOver(chunk), chunk.buffer.byteLength]);
        hash.update(chunk);
        // A slow consumer: reading must stop and resume without losing or reordering a byte.
        setTimeout(cb, 1);
      },
    });
    const g = new PipeGather(stdout, dst, () => {});
    await g.done;
    expect(hash.digest('hex')).toBe(want.digest('hex'));
    expect(writes.reduce((a, [n]) => a + n, 0)).toBe(g.bytes);
    // The output is ~14.9 MB: most of it in full 64 KiB buffers, moved without a copy.
    const full = writes.filter(([n, moved, size]) => n === 64 * 1024 && moved && size === n);
    expect(full.length * 64 * 1024).toBeGreaterThan(g.bytes / 2);
    expect(Math.max(...writes.map(([n]) => n))).toBeLessThanOrEqual(64 * 1024);
  });

  it('bytes a pipe socket read before the gatherer existed come first, then the rest in order', async () => {
    const { stdout } = childOut("printf 'early\\n'; sleep 0.3; seq 1 100000");
    // The socket starts reading when it is made: wait until it holds the first line.
    await new Promise<void>((r) => {
      const poll = () => (stdout.readableLength > 0 ? r() : setTimeout(poll, 5));
      poll();
    });
    const { dst, chunks } = collector(256 * 1024);
    const g = new PipeGather(stdout, dst, () => {});
    await g.done;
    const want = `early\n${Array.from({ length: 100000 }, (_, i) => `${i + 1}\n`).join('')}`;
    expect(Buffer.concat(chunks).toString()).toBe(want);
    expect(g.bytes).toBe(Buffer.byteLength(want));
  });

  it('ends the writer when the pipe had already ended before it was read', async () => {
    const { stdout, exited } = childOut('true');
    expect(await exited).toBe(0);
    // Consumed to its end (and closed) before the gatherer exists: its 'end' has already been emitted.
    stdout.resume();
    if (!stdout.destroyed) await new Promise((r) => stdout.once('close', r));
    expect(stdout.readableEnded).toBe(true);
    const dst = recorder(4096);
    const g = new PipeGather(stdout, dst, () => {});
    await g.done;
    expect(dst.writableFinished).toBe(true);
    expect(dst.sizes).toEqual([]);
  });

  it('a failing writer rejects with its error and destroys the pipe', async () => {
    const { stdout } = childOut('yes | head -c 1000000');
    const err = Object.assign(new Error('disk gone'), { code: 'EIO' });
    const dst = recorder(4096, err);
    const g = new PipeGather(stdout, dst, () => {});
    await expect(g.done).rejects.toBe(err);
    expect(stdout.destroyed).toBe(true);
    expect(dst.destroyed).toBe(true);
  });
});

describe('bash through the engine', () => {
  it('output that trickles reaches the engine while the command still waits', async () => {
    const { engine, dir } = await engineWith([]);
    const go = join(dir, 'go');
    const handle = engine.call('bash', {
      command: `printf 'first\\n'; while [ ! -e ${go} ]; do sleep 0.01; done; printf 'second\\n'`,
    });
    // The command waits for `go` until the engine has its first line: gathered bytes must not wait for more.
    for await (const ev of handle.events()) {
      if (ev.type === 'progress' && (ev.streams[0]?.bytes ?? 0) === 6) break;
    }
    await fsp.writeFile(go, '');
    const r = await handle.result;
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    expect((await readBlob(engine, r.output.streams[0]?.digest as string)).toString()).toBe('first\nsecond\n');
    await expectStoreClean(engine);
  });

  it('stdout and stderr of many sizes keep every byte, with nothing left behind', async () => {
    const { engine } = await engineWith([]);
    const marker = `gather-${process.pid}-${Date.now()}`;
    // Reads of every size: bursts of 1..70,000 bytes on both pipes, each burst its own write.
    const command = `: ${marker}; for n in 1 2 3 4095 4096 4097 65535 65536 65537 70000 131072 262143 262144 262145; do head -c $n /dev/zero | tr '\\0' a; head -c $n /dev/zero | tr '\\0' b >&2; done`;
    const r = await engine.run('bash', { command });
    expect(r.status).toBe('success');
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const sizes = [1, 2, 3, 4095, 4096, 4097, 65535, 65536, 65537, 70000, 131072, 262143, 262144, 262145];
    const total = sizes.reduce((a, b) => a + b, 0);
    const [out, err] = r.output.streams;
    expect(out?.bytes).toBe(total);
    expect(err?.bytes).toBe(total);
    expect(out?.digest).toBe(createHash('sha256').update(Buffer.alloc(total, 'a')).digest('hex'));
    expect(err?.digest).toBe(createHash('sha256').update(Buffer.alloc(total, 'b')).digest('hex'));
    await expectStoreClean(engine);
    expect(await waitNoProcess(marker)).toEqual([]);
  });
});
