/**
 * A real full disk: the store on a 20 MiB tmpfs (mounted in a mount
 * namespace of its own, so the test needs no root: `unshare -rm` maps the
 * user to root there), and a bash command writing 60 MB into it. The call
 * fails EDISK and keeps what reached the disk before it filled: the first
 * line and most of the rest, as an incomplete output whose totals are what
 * was kept, its error saying what was accepted, its display saying both.
 * The reserve (store/space-reserve.ts) is what lets the pin, the manifest
 * and the empty stderr be written on a disk with no space left.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, promises as fsp, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TerminalResult } from '../../engine/index.js';
import { Store } from '../../store/store.js';
import { heldPins } from '../store/helpers.js';
import { reportNotRun } from '../support/run.js';

const run = promisify(execFile);
const CLI = resolve('dist', 'cli', 'main.js');
/** A size no other process writes, so pgrep finds only this command's head. */
const BYTES = 60_000_017;

/** Mounts a 20 MiB tmpfs at $1, runs the command there, and copies what the store kept to $2. */
const SCRIPT = `
set -e
mount -t tmpfs -o size=20m tmpfs "$1"
"$3" "$4" run bash --store "$1/.sluice" --json --args "$5" > "$2/run.json" || echo "$?" > "$2/code"
ls -A "$1/.sluice/tmp" > "$2/tmp.txt"
cp -a "$1/.sluice" "$2/store"
`;

/** Whether this machine lets the test mount a tmpfs in a namespace of its own, and if not why. */
function probe(): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-full-disk-probe-'));
  try {
    const r = spawnSync('unshare', ['-rm', 'sh', '-c', 'mount -t tmpfs -o size=1m tmpfs "$1"', 'sh', dir], {
      encoding: 'utf8',
    });
    if (r.status === 0) return undefined;
    return `unshare -rm could not mount a tmpfs (${(r.stderr || String(r.error ?? r.status)).trim()})`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const why = probe();
let dir = '';

beforeAll(async () => {
  if (why) await reportNotRun('Full-disk suites', why);
  dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-full-disk-'));
  await fsp.mkdir(join(dir, 'mnt'));
});

afterAll(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

async function hashFile(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}

describe.runIf(why === undefined)('a store on a disk that fills mid-capture', () => {
  it('keeps the first line and every byte written before ENOSPC, as an incomplete output that says so', async () => {
    const out = join(dir, 'out');
    await fsp.mkdir(out);
    const args = JSON.stringify({ command: `echo first-line; head -c ${BYTES} /dev/zero | tr "\\0" y` });
    await run('unshare', ['-rm', 'sh', '-c', SCRIPT, 'sh', join(dir, 'mnt'), out, process.execPath, CLI, args], {
      maxBuffer: 1 << 20,
    });
    expect((await fsp.readFile(join(out, 'code'), 'utf8')).trim()).toBe('1');
    const r = JSON.parse(await fsp.readFile(join(out, 'run.json'), 'utf8')) as TerminalResult;
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EDISK' } });
    expect(r.error?.details).toMatchObject({ errno: 'ENOSPC' });
    if (r.output?.kind !== 'streams') throw new Error(`expected streams, got ${JSON.stringify(r.output)}`);
    const [stdout, stderr] = r.output.streams;
    if (!stdout || !stderr) throw new Error('expected stdout and stderr');
    // Most of the 20 MiB disk, all of it the command's first bytes.
    expect(stdout.bytes).toBeGreaterThan(16 * 1024 * 1024);
    expect(stdout.lines).toBe(2);
    const accepted =
      (r.error?.details as { accepted?: Array<{ stream: string; bytes: number }> } | undefined)?.accepted ?? [];
    expect(accepted.map((a) => a.stream)).toEqual(['stdout', 'stderr']);
    expect(accepted[0]?.bytes).toBeGreaterThanOrEqual(stdout.bytes);
    expect(stderr).toMatchObject({ bytes: 0, lines: 0 });
    const expected = createHash('sha256')
      .update('first-line\n')
      .update(Buffer.alloc(stdout.bytes - 11, 'y'))
      .digest('hex');
    expect(stdout.digest).toBe(expected);
    expect(r.display).toMatch(
      /\nKept \(incomplete\): stdout \S+ MiB in 2 lines of \S+ MiB accepted, stderr empty; the rest could not be stored$/,
    );
    expect(r.model).toMatch(/^\[stdout\]\nfirst-line\ny/);
    expect(r.model).toContain(`artifact://${r.output.manifest}/stdout`);

    // What the store kept, copied off the tmpfs: the blob is the prefix, the manifest names both streams.
    const store = await Store.open(join(out, 'store'));
    try {
      expect(await hashFile(store.layout.blobPath(stdout.digest))).toBe(stdout.digest);
      const manifest = await store.loadManifest(r.output.manifest);
      expect(manifest.streams.map((s) => [s.name, s.digest, s.bytes])).toEqual([
        ['stdout', stdout.digest, stdout.bytes],
        ['stderr', stderr.digest, 0],
      ]);
      const page = await store.readPage(`artifact://${r.output.manifest}/stdout`, { limit: 1 });
      expect(page.content).toBe('first-line\n');
      expect(page.totalLines).toBe(2);
    } finally {
      await store.close();
    }
    // Nothing left behind: no temporary file on the full disk, no pin held, no process of the command.
    expect((await fsp.readFile(join(out, 'tmp.txt'), 'utf8')).trim()).toBe('');
    expect(await heldPins(join(out, 'store'))).toEqual([]);
    const pgrep = await run('pgrep', ['-f', `head -c ${BYTES}`]).catch((e: { code?: number }) => e);
    expect((pgrep as { code?: number }).code).toBe(1);
  });
});
