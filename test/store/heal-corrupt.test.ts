/**
 * Corrupt blobs heal: a publish that would deduplicate against a blob of
 * the right size but the wrong content hashes it, finds it corrupt and
 * places its own copy over it, also in a new process (a new Store knows
 * nothing of earlier reads). `verify --repair` moves corrupt blobs to
 * quarantine/, so the next publish of that content restores them.
 *
 * Regression: after a same-size corruption, running the same command again
 * reported success with the same digest, and reading it still failed
 * EINTEGRITY.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { realIO } from '../../store/io.js';
import { Store } from '../../store/store.js';
import { verifyStore } from '../../store/verify.js';
import { CLI, countBytesRead, flipBit, sha256, sluice, tempDir, tmpEntries } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

async function openedTwice(): Promise<{ dir: string; first: Store; second: Store }> {
  const dir = join(await tempDir(), 'store');
  return { dir, first: await Store.open(dir), second: await Store.open(dir) };
}

describe('healing corrupt blobs', () => {
  it('a publish of the same content replaces a same-size corrupt blob, also from another Store', async () => {
    const { first, second } = await openedTwice();
    const content = 'the same bytes, published twice\n';
    const info = await first.publishBytes(content);
    await flipBit(first.layout.blobPath(info.digest), 3);
    await expect(first.readPage(`artifact://${info.digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    // A Store that never read the blob (another process, in effect) still notices.
    const again = await second.publishBytes(content);
    expect(again).toEqual({ digest: info.digest, bytes: info.bytes, lines: 1, deduplicated: false });
    expect(await fsp.readFile(first.layout.blobPath(info.digest), 'utf8')).toBe(content);
    expect(await first.readPage(`artifact://${info.digest}`)).toMatchObject({ content, lossy: false });
    expect(await tmpEntries(first)).toEqual([]);
  });

  it('an intact blob is deduplicated without hashing it again: not after its own publish, once for another Store', async () => {
    const { first, second } = await openedTwice();
    const content = Buffer.alloc(8 * 1024 * 1024, 0x61);
    const a = await first.publishBytes(content);
    // The publisher hashed it while writing and remembers the file it placed.
    const b = await countBytesRead(() => first.publishBytes(content));
    expect(b.result).toEqual({ ...a, deduplicated: true });
    expect(b.bytesRead).toBeLessThan(64 * 1024);
    // Another Store (another process, in effect) checks it once, then remembers it across its mtime refreshes.
    const c = await countBytesRead(() => second.publishBytes(content));
    expect(c.result.deduplicated).toBe(true);
    expect(c.bytesRead).toBeGreaterThanOrEqual(content.length);
    const d = await countBytesRead(() => second.publishBytes(content));
    expect(d.result.deduplicated).toBe(true);
    expect(d.bytesRead).toBeLessThan(64 * 1024);
    const read = await countBytesRead(() => second.readPage(`artifact://${a.digest}`, { limit: 1 }));
    expect(read.bytesRead).toBeLessThan(content.length);
  });

  it('a repair moves only the file it found corrupt: a copy healed in between stays (verify/heal race)', async () => {
    const { dir, first } = await openedTwice();
    const info = await first.publishBytes('raced\n');
    await flipBit(first.layout.blobPath(info.digest), 0);
    // The audit hashes it and finds it corrupt; just before it moves it, a publisher heals it.
    const healer = await Store.open(dir);
    const auditor = await Store.open(dir, {
      io: {
        ...realIO,
        mkdir: async (path) => {
          if (path === first.layout.quarantine) expect((await healer.publishBytes('raced\n')).deduplicated).toBe(false);
          return realIO.mkdir(path);
        },
      },
    });
    const report = await verifyStore(auditor, { repair: true });
    expect(report.quarantined).toEqual([]);
    expect(report.repairFailed).toEqual([expect.stringContaining('replaced by a good copy while it was checked')]);
    // The healed copy is in place and reads back; nothing good went to quarantine/.
    expect(await fsp.readFile(first.layout.blobPath(info.digest), 'utf8')).toBe('raced\n');
    expect(await fsp.readdir(first.layout.quarantine)).toEqual([]);
    expect(await healer.readPage(`artifact://${info.digest}`)).toMatchObject({ content: 'raced\n' });
  });

  it('a repair that cannot create quarantine/ reports each failure and finishes the audit', async () => {
    const { dir, first } = await openedTwice();
    const bad = await first.publishBytes('damaged\n');
    const good = await first.publishBytes('fine\n');
    await flipBit(first.layout.blobPath(bad.digest), 0);
    await fsp.writeFile(join(dir, 'quarantine'), 'not a directory');
    const r = await sluice(['verify', '--repair', '--json', '--store', dir]);
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout.toString());
    expect(report).toMatchObject({ scanned: 2, ok: 1, corrupt: [bad.digest], quarantined: [] });
    expect(report.repairFailed).toEqual([expect.stringMatching(new RegExp(`^${bad.digest}: EDISK: `))]);
    expect(await first.hasBlob(good.digest)).toBe(true);
  });

  it('a large corrupt blob and its line index are replaced, and pages deep inside it read right', async () => {
    const { first, second } = await openedTwice();
    const line = (i: number) => `line ${String(i).padStart(8, '0')}\n`;
    const content = Array.from({ length: 200_000 }, (_, i) => line(i)).join('');
    const info = await first.publishBytes(content);
    await flipBit(first.layout.blobPath(info.digest), 1_000_000);
    const again = await second.publishBytes(content);
    expect(again.deduplicated).toBe(false);
    expect(await second.readPage(`artifact://${info.digest}`, { offset: 150_000, limit: 1 })).toMatchObject({
      content: line(150_000),
    });
  });

  it('sluice verify --repair quarantines corrupt blobs; the next publish of the content restores them', async () => {
    const { dir, first } = await openedTwice();
    const good = await first.publishBytes('good\n');
    const bad = await first.publishBytes('to be damaged\n');
    await flipBit(first.layout.blobPath(bad.digest), 0);
    const r = await sluice(['verify', '--repair', '--json', '--store', dir]);
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout.toString());
    expect(report).toMatchObject({ scanned: 2, ok: 1, corrupt: [bad.digest] });
    expect(report.quarantined).toHaveLength(1);
    const [name] = report.quarantined as string[];
    expect(name?.startsWith(`${bad.digest}.`)).toBe(true);
    // The damaged bytes are kept for inspection, outside blobs/: the artifact is now missing, not wrong.
    expect(await fsp.readFile(join(dir, 'quarantine', name as string))).not.toEqual(Buffer.from('to be damaged\n'));
    await expect(first.readPage(`artifact://${bad.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(await first.hasBlob(good.digest)).toBe(true);
    const after = await sluice(['verify', '--json', '--store', dir]);
    expect(JSON.parse(after.stdout.toString())).toMatchObject({ scanned: 1, ok: 1, corrupt: [] });
    const restored = await first.publishBytes('to be damaged\n');
    expect(restored).toMatchObject({ digest: sha256('to be damaged\n'), deduplicated: false });
    expect(await first.readPage(`artifact://${bad.digest}`)).toMatchObject({ content: 'to be damaged\n' });
    expect(CLI.length).toBeGreaterThan(0);
  });

  it('sluice run of the same command after a same-size corruption publishes a readable artifact again', async () => {
    const dir = join(await tempDir(), 'store');
    const args = ['run', 'bash', '--args', JSON.stringify({ command: 'echo heal-me' }), '--json', '--store', dir];
    const first = JSON.parse((await sluice(args)).stdout.toString());
    const digest = first.output.streams[0].digest as string;
    const store = await Store.open(dir);
    await flipBit(store.layout.blobPath(digest), 1);
    const second = JSON.parse((await sluice(args)).stdout.toString());
    expect(second.output.streams[0].digest).toBe(digest);
    const read = await sluice(['read', `artifact://${second.output.manifest}/stdout`, '--store', dir]);
    expect(read).toMatchObject({ code: 0 });
    expect(read.stdout.toString()).toBe('heal-me\n');
  });
});
