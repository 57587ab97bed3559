/**
 * Rules 3, 6 and 8 against a real store: every reference in the retry
 * snapshot is a public `read` URI that reads back the whole stored output,
 * and compaction stores nothing (the store's files are the same before and
 * after; no blob holds the omission marker).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ARTIFACT_READ_OMITTED, ContextLengthError, compact, type HistoryItem } from '../../engine/index.js';
import { encodeManifest } from '../../store/manifest.js';
import type { Store } from '../../store/store.js';
import { filesUnder, tempStore, tmpEntries } from '../store/helpers.js';
import { call, pageRef, readUris, result, scripted, summary, user } from './support.js';

/** SHA-256 of everything `read` returns for `uri`, page by page (never the whole text at once). */
async function digestOfReads(store: Store, uri: string): Promise<{ digest: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  let next: number | null = 0;
  while (next !== null) {
    const page = await store.readPage(uri, { offset: next, limit: 2000 });
    hash.update(page.content);
    bytes += Buffer.byteLength(page.content);
    next = page.nextOffset;
  }
  return { digest: hash.digest('hex'), bytes };
}

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

describe('retry references read back through the store', () => {
  it('address the full stored output of single and named streams, and compaction writes nothing', async () => {
    const store = await tempStore();
    const stdout = Array.from({ length: 5000 }, (_, i) => `line ${i} é\n`).join('');
    const stderr = 'warning: deprecated\n';
    const single = 'result body\n'.repeat(300);
    const entries = [];
    for (const [name, content] of [
      ['stdout', stdout],
      ['stderr', stderr],
      ['empty', ''],
    ] as const) {
      entries.push({ name, ...(await store.publishBytes(content)) });
    }
    const manifest = await store.publishBytes(
      encodeManifest(entries.map(({ name, digest, bytes, lines }) => ({ name, digest, bytes, lines }))),
    );
    const one = await store.publishBytes(single);
    const h: HistoryItem[] = [
      summary('S1'),
      call('b1', 'bash', { command: 'gen' }),
      result('b1', {
        model: 'preview only\n',
        output: {
          kind: 'streams',
          manifest: manifest.digest,
          streams: entries.map((e) => ({ ...e, truncated: e.name === 'stdout' })),
        },
      }),
      call('r1', 'read', { filePath: `artifact://${manifest.digest}/stdout`, offset: 0 }),
      result('r1', { model: stdout.slice(0, 100), output: pageRef(stdout.slice(0, 100)) }),
      user('recent'),
      call('t1', 'fetch', {}),
      result('t1', {
        model: 'result body\n',
        output: { kind: 'single', digest: one.digest, bytes: one.bytes, lines: one.lines, truncated: true },
      }),
    ];
    const filesBefore = await filesUnder(store.root);
    const s = scripted({ throws: new ContextLengthError('too long') }, { returns: 'S2' });
    const r = await compact(h, s.summarizer, { keepRecent: 3 });
    expect(r.ok).toBe(true);

    const uris = readUris(s.inputs[1]!.text);
    expect(uris).toEqual([
      `artifact://${manifest.digest}/stdout`,
      `artifact://${manifest.digest}/stderr`,
      `artifact://${manifest.digest}/empty`,
      `artifact://${one.digest}`,
    ]);
    const expected = [stdout, stderr, '', single];
    for (const [i, uri] of uris.entries()) {
      const want = expected[i] as string;
      expect(await digestOfReads(store, uri), uri).toEqual({ digest: sha(want), bytes: Buffer.byteLength(want) });
    }

    // Nothing stored: same files, no blob of the marker, nothing left in tmp/.
    expect(await filesUnder(store.root)).toEqual(filesBefore);
    expect(await store.hasBlob(sha(ARTIFACT_READ_OMITTED))).toBe(false);
    expect(filesBefore.some((f) => f.includes(sha(ARTIFACT_READ_OMITTED)))).toBe(false);
    expect(await tmpEntries(store)).toEqual([]);
  });
});
