import { promises as fsp } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Store } from '../../store/store.js';
import { STORE_BACKENDS } from './backends.js';

async function put(store: Store, content: string): Promise<string> {
  return `artifact://${(await store.publishBytes(content)).digest}`;
}

/** The lines of `s`, each with its `\n`, by the shared rule. */
function linesOf(s: string): string[] {
  return s.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** Line start byte offsets of an index file's entries (header: 32 bytes; entries: 16 bytes, line then offset). */
async function indexEntries(path: string): Promise<{ line: number; byte: number }[]> {
  const buf = await fsp.readFile(path);
  const out: { line: number; byte: number }[] = [];
  for (let at = 32; at + 16 <= buf.length; at += 16) {
    out.push({ line: Number(buf.readBigUInt64LE(at)), byte: Number(buf.readBigUInt64LE(at + 8)) });
  }
  return out;
}

describe.each(STORE_BACKENDS)('UTF-8 across page, read and index boundaries ($name)', ({ openStore }) => {
  it('returns 4-byte emoji and other multi-byte characters intact at page boundaries', async () => {
    const store = await openStore();
    const content = '😀\n€😀\né\n😀😀😀\n𝄞end';
    const uri = await put(store, content);
    const lines = linesOf(content);
    for (let offset = 0; offset < lines.length; offset++) {
      for (let limit = 1; limit <= lines.length - offset; limit++) {
        const page = await store.readPage(uri, { offset, limit });
        expect(page.content).toBe(lines.slice(offset, offset + limit).join(''));
      }
    }
    expect((await store.readPage(uri)).content).toBe(content);
  });

  it('keeps a 4-byte emoji whole when it straddles a 64 KiB read inside a page', async () => {
    const store = await openStore();
    // Bytes 65535..65538 hold the emoji: the page reader's first read ends in its middle.
    for (const pad of [65533, 65534, 65535, 65536]) {
      const content = `${'a'.repeat(pad)}😀tail\n€\n`;
      const page = await store.readPage(await put(store, content));
      expect(page.content).toBe(content);
      expect(Buffer.from(page.content).equals(Buffer.from(content))).toBe(true);
    }
  });

  it('skips to a deep page across read boundaries that split multi-byte characters', async () => {
    const store = await openStore();
    const lines = Array.from({ length: 9000 }, (_, i) => `${i}:${'é'.repeat(i % 13)}😀${'€'.repeat(i % 5)}\n`);
    const uri = await put(store, lines.join(''));
    for (const offset of [1, 1234, 4096, 8999]) {
      expect((await store.readPage(uri, { offset, limit: 3 })).content).toBe(lines.slice(offset, offset + 3).join(''));
    }
  });

  it('pages correctly at every index entry of a large multi-byte blob', async () => {
    const store = await openStore();
    // Long lines (up to ~70 KB) of 2- and 4-byte characters: entries are placed by the 64 KiB rule,
    // each right after a line that ends in an emoji.
    const lines = Array.from({ length: 80 }, (_, i) => `${'é'.repeat(9000 + ((i * 7919) % 26000))}😀\n`);
    const content = lines.join('');
    expect(Buffer.byteLength(content)).toBeGreaterThan(1024 * 1024);
    const uri = await put(store, content);
    const digest = uri.slice('artifact://'.length);
    const entries = await indexEntries(store.layout.indexPath(digest));
    expect(entries.length).toBeGreaterThan(10);
    for (const { line } of entries) {
      if (line >= lines.length) continue;
      expect((await store.readPage(uri, { offset: line, limit: 1 })).content).toBe(lines[line]);
      expect((await store.readPage(uri, { offset: line - 1, limit: 2 })).content).toBe(
        lines.slice(line - 1, line + 1).join(''),
      );
    }
    // Every entry points just past a `\n` that follows a complete emoji.
    const bytes = Buffer.from(content);
    for (const { byte } of entries) expect(bytes.subarray(byte - 5, byte).toString()).toBe('😀\n');
  });
});
