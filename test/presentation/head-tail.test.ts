/**
 * Head+tail previews: the view shows the head, one hint whose read call
 * continues at the first line not shown, and the tail from the zero-based
 * line its marker names. Followed through the real store, head + the middle
 * read at the hint + tail must be the stream's bytes exactly.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StreamPreviewBuilder } from '../../engine/presentation/head-tail.js';
import { renderBoundedModelView, renderModelView, streamPreviewBudget } from '../../engine/presentation/model-view.js';
import { TailRing } from '../../engine/presentation/tail.js';
import { encodeManifest } from '../../store/manifest.js';
import type { Store } from '../../store/store.js';
import { tempStore } from '../store/helpers.js';
import { byteLength, totalsOf, utf8 } from './support.js';

const HINT = /^\[Truncated: ([^\]]*)\. Read more: read\(filePath="(artifact:\/\/[^"]+)", offset=(\d+)\)\]$/;
const TAIL = /^\[Tail: from offset=(\d+) to the end\]$/;

/** The lines `[from, to)` of a stored stream, read page by page exactly as a model would. */
async function readLines(store: Store, uri: string, from: number, to: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let next: number | null = from;
  while (next !== null && next < to) {
    const page = await store.readPageBytes(uri, { offset: next, limit: Math.min(2000, to - next) });
    parts.push(page.bytes);
    next = page.nextOffset;
  }
  return Buffer.concat(parts);
}

function build(content: Uint8Array, maxLines: number, maxBytes: number, chunk: number, share = 0.5) {
  const b = new StreamPreviewBuilder(maxLines, maxBytes, 'head+tail', share);
  for (let i = 0; i < content.length; i += chunk) b.push(content.subarray(i, i + chunk));
  return b.finish(totalsOf(content));
}

/** Splits a rendered single view into head text, hint and tail. */
function parse(rendered: string) {
  const lines = rendered.split('\n');
  const h = lines.findIndex((l) => HINT.test(l));
  const m = HINT.exec(lines[h] as string) as RegExpExecArray;
  const t = TAIL.exec(lines[h + 1] ?? '');
  const offset = Number(m[3]);
  return {
    // The head's whole lines are the first `offset` lines of the view; a cut line follows them.
    whole: lines
      .slice(0, offset)
      .map((l) => `${l}\n`)
      .join(''),
    shown: m[1] as string,
    uri: m[2] as string,
    offset,
    tailStart: t ? Number(t[1]) : undefined,
    tail: t ? lines.slice(h + 2).join('\n') : undefined,
  };
}

const lineArb = fc
  .array(fc.constantFrom('a', 'b', 'é', '€', '😀', ' ', '\r', 'xyzxyzxyz'), { maxLength: 30 })
  .map((p) => p.join(''));
const contentArb = fc
  .tuple(fc.array(lineArb, { minLength: 0, maxLength: 120 }), fc.boolean())
  .map(([ls, endsWithNewline]) => ls.join('\n') + (endsWithNewline && ls.length > 0 ? '\n' : ''));

describe('head+tail previews', () => {
  it('shows the head, one hint with the totals and the omitted middle, then the tail from its offset', async () => {
    const store = await tempStore();
    const content = Array.from({ length: 100 }, (_, i) => `line ${i}\n`).join('');
    const blob = await store.publishBytes(content);
    const shown = build(utf8(content), 10, 10_000, 7);
    const rendered = renderModelView({ kind: 'single', digest: blob.digest, ...shown });
    expect(rendered).toBe(
      `${Array.from({ length: 5 }, (_, i) => `line ${i}\n`).join('')}` +
        `[Truncated: lines 1-5 and 96-100 of 100 shown; lines 6-95 (715 B) omitted (790 B total). Read more: read(filePath="artifact://${blob.digest}", offset=5)]\n` +
        '[Tail: from offset=95 to the end]\n' +
        `${Array.from({ length: 5 }, (_, i) => `line ${95 + i}\n`).join('')}`,
    );
  });

  it('property: head + the middle read at the hint + tail rebuild the stream byte for byte', async () => {
    const store = await tempStore();
    await fc.assert(
      fc.asyncProperty(
        contentArb,
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 8, max: 300 }),
        fc.integer({ min: 1, max: 50 }),
        fc.double({ min: 0.1, max: 0.9, noNaN: true }),
        async (content, maxLines, maxBytes, chunk, share) => {
          const bytes = utf8(content);
          const blob = await store.publishBytes(bytes);
          const shown = build(bytes, maxLines, maxBytes, chunk, share);
          const rendered = renderModelView({ kind: 'single', digest: blob.digest, ...shown });
          if (!shown.preview.truncated) {
            expect(rendered).toBe(content);
            return;
          }
          // Head and tail share the limits: the view shows no more than a head-only preview would.
          expect(shown.preview.bytes + byteLength(shown.tail?.text ?? '')).toBeLessThanOrEqual(maxBytes);
          const v = parse(rendered);
          expect(v.uri).toBe(`artifact://${blob.digest}`);
          expect(v.offset).toBe(shown.preview.offset);
          const whole = v.whole;
          const end = v.tailStart ?? totalsOf(bytes).lines;
          const middle = await readLines(store, v.uri, v.offset, end);
          let tail = Buffer.alloc(0);
          if (v.tail !== undefined) {
            // The view terminates a last line without its newline; the artifact keeps the bytes.
            const text = content.endsWith('\n') ? v.tail : v.tail.replace(/\n$/, '');
            tail = Buffer.from(text, 'utf8');
            expect(v.shown).toContain('omitted');
          }
          expect(Buffer.concat([Buffer.from(whole, 'utf8'), middle, tail]).equals(Buffer.from(bytes))).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps the aggregate bound with 16 streams in head+tail', () => {
    const names = Array.from({ length: 16 }, (_, i) => `${String(i).padStart(2, '0')}${'n'.repeat(62)}`);
    const opts = { maxLines: 2000, maxBytes: 51200, maxModelBytes: 256 * 1024 };
    const limits = streamPreviewBudget(16, opts);
    const content = utf8(Array.from({ length: 30_000 }, (_, i) => `row ${i} ${'é'.repeat(i % 40)}\n`).join(''));
    const streams = names.map((name) => ({ name, ...build(content, limits.maxLines, limits.maxBytes, 65536) }));
    for (const s of streams) expect(s.tail).toBeDefined();
    const rendered = renderBoundedModelView({ kind: 'streams', manifest: '0'.repeat(64), streams }, opts.maxModelBytes);
    expect(byteLength(rendered)).toBeLessThanOrEqual(opts.maxModelBytes);
    expect(rendered.match(/^\[Tail: from offset=\d+ to the end\]$/gm)).toHaveLength(16);
  });

  it('shows no tail when the last line alone is longer than the tail share, and the hint still reads on', async () => {
    const store = await tempStore();
    const content = `first\n${'z'.repeat(5000)}`;
    const blob = await store.publishBytes(content);
    const shown = build(utf8(content), 10, 100, 13);
    expect(shown.tail).toBeUndefined();
    const rendered = renderModelView({ kind: 'single', digest: blob.digest, ...shown });
    expect(rendered.split('\n')[0]).toBe('first');
    expect(parse(rendered)).toMatchObject({ offset: 1, tailStart: undefined });
  });

  it('reads a stream tail through the manifest with each stream its own hint', async () => {
    const store = await tempStore();
    const out = Array.from({ length: 50 }, (_, i) => `o${i}\n`).join('');
    const blob = await store.publishBytes(out);
    const err = await store.publishBytes('e\n');
    const manifest = await store.publishBytes(
      encodeManifest([
        { name: 'stdout', digest: blob.digest, bytes: blob.bytes, lines: blob.lines },
        { name: 'stderr', digest: err.digest, bytes: err.bytes, lines: err.lines },
      ]),
    );
    const rendered = renderModelView({
      kind: 'streams',
      manifest: manifest.digest,
      streams: [
        { name: 'stdout', ...build(utf8(out), 4, 1000, 5) },
        { name: 'stderr', ...build(utf8('e\n'), 4, 1000, 5) },
      ],
    });
    expect(rendered).toBe(
      '[stdout]\no0\no1\n' +
        `[Truncated: lines 1-2 and 49-50 of 50 shown; lines 3-48 (176 B) omitted (190 B total). Read more: read(filePath="artifact://${manifest.digest}/stdout", offset=2)]\n` +
        '[Tail: from offset=48 to the end]\no48\no49\n\n[stderr]\ne\n',
    );
    expect((await readLines(store, `artifact://${manifest.digest}/stdout`, 2, 48)).toString()).toBe(
      Array.from({ length: 46 }, (_, i) => `o${i + 2}\n`).join(''),
    );
  });
});

describe('the tail ring', () => {
  it('holds at most its bound, whatever the stream size and chunking', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5000 }),
        fc.array(fc.integer({ min: 0, max: 9000 }), { maxLength: 40 }),
        (maxBytes, sizes) => {
          const ring = new TailRing(maxBytes);
          const all: number[] = [];
          let n = 0;
          for (const size of sizes) {
            const chunk = new Uint8Array(size);
            for (let i = 0; i < size; i++) chunk[i] = (n++ % 7 === 6 ? 10 : 97 + (n % 26)) & 0xff;
            ring.push(chunk);
            for (const b of chunk) all.push(b);
            expect(ring.allocatedBytes).toBeLessThanOrEqual(maxBytes + 1);
          }
          const lines = totalsOf(new Uint8Array(all)).lines;
          const tail = ring.finish(lines, Number.MAX_SAFE_INTEGER, 0);
          if (tail === undefined) return;
          // The tail is exactly the stream's end, starting on a line start.
          const text = Buffer.from(all).toString('latin1');
          expect(text.endsWith(tail.text)).toBe(true);
          expect(tail.startByte).toBe(all.length - tail.text.length);
          expect(tail.startByte === 0 || all[tail.startByte - 1] === 10).toBe(true);
          expect(tail.bytes).toBeLessThanOrEqual(maxBytes);
        },
      ),
      { numRuns: 300 },
    );
  });
});
