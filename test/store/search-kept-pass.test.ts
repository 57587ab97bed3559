/**
 * A search followed page by page goes on with the pass the page before
 * stopped (store/search-park.ts): the pages are exactly those of fresh
 * passes, and the blob a kept pass holds open is closed when the search
 * ends, when the store closes, and when no page takes it in time.
 */
import { readdirSync, readlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { type SearchOptions, type SearchPage, searchArtifact } from '../../store/search.js';
import { closeParked } from '../../store/search-park.js';
import type { Store } from '../../store/store.js';
import { tempStore } from './helpers.js';

/** Lines over several 2 MiB reads, a hit on a pseudo-random sixty-first of them (some in upper case). */
function content(lines: number): string {
  let x = 12345;
  const out: string[] = [];
  for (let i = 0; i < lines; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    const pad = 'lorem ipsum '.repeat(x % 9);
    const hit = x % 61 === 0 ? (x % 3 === 0 ? ' ERR42x' : ' err42x') : '';
    out.push(`${i} ${pad}${hit}`);
  }
  return `${out.join('\n')}\n`;
}

/** Every page of a search from line 0; `fresh` drops the kept pass before each page. */
async function allPages(store: Store, uri: string, opts: SearchOptions, fresh: boolean): Promise<SearchPage[]> {
  const pages: SearchPage[] = [];
  let offset: number | null = 0;
  while (offset !== null) {
    if (fresh) await closeParked(store);
    const page = await searchArtifact(store, uri, { ...opts, offset });
    pages.push(page);
    offset = page.nextOffset;
  }
  return pages;
}

/** Whether this process has `path` open. */
function isOpen(path: string): boolean {
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === path) return true;
    } catch {
      // A descriptor closed while listing.
    }
  }
  return false;
}

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

async function setUp(): Promise<{ store: Store; uri: string; path: string; text: string[] }> {
  const store = await tempStore();
  stores.push(store);
  const body = content(160_000);
  const w = store.writer();
  await w.write(Buffer.from(body));
  const blob = await w.commit();
  return {
    store,
    uri: `artifact://${blob.digest}`,
    path: store.layout.blobPath(blob.digest),
    text: body.split('\n').slice(0, -1),
  };
}

describe('a search followed page by page', () => {
  it('gives the pages of fresh passes, for literals, folded literals and regular expressions, at any limit', async () => {
    const { store, uri, text } = await setUp();
    expect(text.length).toBe(160_000);
    const cases: Array<[SearchOptions, (l: string) => boolean]> = [
      [{ pattern: 'err42x' }, (l) => l.includes('err42x')],
      [{ pattern: 'err42x', ignoreCase: true }, (l) => /err42x/i.test(l)],
      [{ pattern: 'ERR\\d+x$', regex: true }, (l) => /ERR\d+x$/.test(l)],
    ];
    for (const [opts, matches] of cases) {
      const expected = text.flatMap((l, i) => (matches(l) ? [i] : []));
      expect(expected.length).toBeGreaterThan(500);
      for (const limit of [3, 100, 1000]) {
        const kept = await allPages(store, uri, { ...opts, limit }, false);
        const fresh = await allPages(store, uri, { ...opts, limit }, true);
        expect(kept).toEqual(fresh);
        expect(kept.flatMap((p) => p.lines.map((l) => l.line))).toEqual(expected);
        expect(kept.flatMap((p) => p.lines.map((l) => l.text))).toEqual(expected.map((i) => text[i]));
        // Every page but the last is full (the last may be empty: a page ends at its last match).
        expect(kept.slice(0, -1).every((p) => p.matches === limit)).toBe(true);
        expect(kept.at(-1)?.nextOffset).toBeNull();
      }
    }
    expect(isOpen(store.layout.root)).toBe(false);
  });

  it('interleaved with another search and run twice at once, each page is still its own', async () => {
    const { store, uri, text } = await setUp();
    const want = (p: string) => text.flatMap((l, i) => (l.includes(p) ? [i] : []));
    const a: number[] = [];
    const b: number[] = [];
    let offA: number | null = 0;
    let offB: number | null = 0;
    while (offA !== null || offB !== null) {
      if (offA !== null) {
        const [p, twin]: [SearchPage, SearchPage] = await Promise.all([
          searchArtifact(store, uri, { pattern: 'err42x', limit: 50, offset: offA }),
          searchArtifact(store, uri, { pattern: 'err42x', limit: 50, offset: offA }),
        ]);
        expect(twin).toEqual(p);
        a.push(...p.lines.map((l) => l.line));
        offA = p.nextOffset;
      }
      if (offB !== null) {
        const p: SearchPage = await searchArtifact(store, uri, { pattern: 'ERR42x', limit: 30, offset: offB });
        b.push(...p.lines.map((l) => l.line));
        offB = p.nextOffset;
      }
    }
    expect(a).toEqual(want('err42x'));
    expect(b).toEqual(want('ERR42x'));
  });

  it('closes the blob at the search end, at the store close, and when no page takes the pass in time', async () => {
    const { store, uri, path } = await setUp();
    const first = await searchArtifact(store, uri, { pattern: 'err42x', limit: 10 });
    expect(first.nextOffset).not.toBeNull();
    expect(isOpen(path)).toBe(true);
    // A page from another line leaves the kept pass alone; the search's end closes it.
    const last = await searchArtifact(store, uri, { pattern: 'err42x', limit: 1000, offset: first.nextOffset ?? 0 });
    expect(isOpen(path)).toBe(last.nextOffset !== null);
    let offset: number | null = last.nextOffset;
    while (offset !== null)
      offset = (await searchArtifact(store, uri, { pattern: 'err42x', limit: 1000, offset })).nextOffset;
    expect(isOpen(path)).toBe(false);

    await searchArtifact(store, uri, { pattern: 'err42x', limit: 10 });
    expect(isOpen(path)).toBe(true);
    const deadline = Date.now() + 10_000;
    while (isOpen(path) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(isOpen(path)).toBe(false);

    await searchArtifact(store, uri, { pattern: 'err42x', limit: 10 });
    expect(isOpen(path)).toBe(true);
    await store.close();
    stores.length = 0;
    expect(isOpen(path)).toBe(false);
  });

  it('a page whose signal is aborted fails with its reason and closes the kept pass', async () => {
    const { store, uri, path } = await setUp();
    const first = await searchArtifact(store, uri, { pattern: 'err42x', limit: 10 });
    expect(isOpen(path)).toBe(true);
    const ac = new AbortController();
    ac.abort(new Error('stopped by the caller'));
    await expect(
      searchArtifact(store, uri, { pattern: 'err42x', limit: 10, offset: first.nextOffset ?? 0, signal: ac.signal }),
    ).rejects.toThrow('stopped by the caller');
    expect(isOpen(path)).toBe(false);
  });
});
