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
import { Store } from '../../store/store.js';
import { CLI, countBytesRead, flipBit, sha256, sluice, tempDir, tmpEntries } from './helpers.js';

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

  it('an intact blob is deduplicated, hashed once: later dedups and reads through the same Store do not hash it again', async () => {
    const { first } = await openedTwice();
    const content = Buffer.alloc(8 * 1024 * 1024, 0x61);
    const a = await first.publishBytes(content);
    const b = await countBytesRead(() => first.publishBytes(content));
    expect(b.result).toEqual({ ...a, deduplicated: true });
    // The one check of its content (and of its line index, a few bytes).
    expect(b.bytesRead).toBeGreaterThanOrEqual(content.length);
    expect(b.bytesRead).toBeLessThan(content.length + 64 * 1024);
    const c = await countBytesRead(() => first.publishBytes(content));
    expect(c.result.deduplicated).toBe(true);
    expect(c.bytesRead).toBe(0); // remembered across the mtime refresh
    const read = await countBytesRead(() => first.readPage(`artifact://${a.digest}`, { limit: 1 }));
    expect(read.bytesRead).toBeLessThan(content.length);
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
