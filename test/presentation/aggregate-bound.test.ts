import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  assertModelViewWithinBound,
  MIN_STREAM_PREVIEW_BYTES,
  minModelViewBytes,
  type OutputView,
  previewBudget,
  renderBoundedModelView,
  renderModelView,
  singlePreviewBudget,
  streamPreviewBudget,
} from '../../engine/presentation/model-view.js';
import { DEFAULT_TOOL_OUTPUT_OPTIONS } from '../../engine/presentation/options.js';
import { PreviewBuilder, previewFromString } from '../../engine/presentation/preview.js';
import { byteLength, expectRoundTrip, totalsOf, utf8 } from './support.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const MANIFEST = sha('manifest of 16');
const defaults = DEFAULT_TOOL_OUTPUT_OPTIONS;

/*
 * Worst-case bytes a stream block adds to its preview: the heading with a
 * 64-byte name (67), then an inserted "\n", the widest hint (every count at
 * 2^53 - 1 digits, head+tail ranges, a cut line, the omitted middle and the
 * total, the URI with a 64-byte name) with its "\n", the tail marker line and
 * the "\n" inserted after the tail: 551 bytes. 16 blocks + 15 separating
 * newlines = 8831; (262144 - 8831) / 16 = 15832.
 */
const SHARE_OF_16 = 15832;
const WIDEST = Number.MAX_SAFE_INTEGER;

describe('per-stream limits under the aggregate bound', () => {
  it('leaves the configured limits alone when the bound is not reached', () => {
    expect(streamPreviewBudget(2, defaults)).toEqual({ maxLines: 2000, maxBytes: 51200 });
    expect(singlePreviewBudget(defaults)).toEqual({ maxLines: 2000, maxBytes: 51200 });
  });

  it('shares the bound when 16 streams of 51200 bytes would exceed it', () => {
    expect(16 * defaults.maxBytes).toBeGreaterThan(defaults.maxModelBytes);
    expect(streamPreviewBudget(16, defaults)).toEqual({ maxLines: 2000, maxBytes: SHARE_OF_16 });
  });

  it('gives a single output the bound minus its newline and hint line', () => {
    // "\n" + the widest hint for a bare URI, its tail marker and their newlines: 419 bytes.
    expect(singlePreviewBudget({ ...defaults, maxModelBytes: 1000 })).toEqual({ maxLines: 2000, maxBytes: 581 });
  });

  it('dispatches on the declaration', () => {
    expect(previewBudget({ kind: 'single' }, { ...defaults, maxModelBytes: 1000 }).maxBytes).toBe(581);
    const names = Array.from({ length: 16 }, (_, i) => `s${i}`);
    expect(previewBudget({ kind: 'streams', streams: names }, defaults).maxBytes).toBe(SHARE_OF_16);
  });

  it('reports ERESOURCELIMIT when even one character per stream does not fit', () => {
    const min = minModelViewBytes(16, 2000);
    expect(min).toBe(8831 + 16 * MIN_STREAM_PREVIEW_BYTES);
    expect(streamPreviewBudget(16, { ...defaults, maxModelBytes: min }).maxBytes).toBe(MIN_STREAM_PREVIEW_BYTES);
    expect(() => streamPreviewBudget(16, { ...defaults, maxModelBytes: min - 1 })).toThrow(
      expect.objectContaining({ code: 'ERESOURCELIMIT' }),
    );
    expect(() => singlePreviewBudget({ ...defaults, maxModelBytes: 100 })).toThrow(
      expect.objectContaining({ code: 'ERESOURCELIMIT' }),
    );
  });

  it('rejects stream counts a declaration cannot have', () => {
    for (const n of [0, 17, 1.5]) {
      expect(() => streamPreviewBudget(n, defaults)).toThrow(expect.objectContaining({ code: 'EBADDECL' }));
    }
  });
});

describe('16 streams with 64-byte names whose limits add up past the bound', () => {
  const names = Array.from({ length: 16 }, (_, i) => `${String(i).padStart(2, '0')}${'n'.repeat(62)}`);
  // Each stream: 100 KB of mixed-width characters, short and long lines, no trailing newline.
  const contentOf = (i: number): string => {
    const unit = ['plain ascii line\n', 'é€😀'.repeat(7 + i), '\r\n', 'x'.repeat(300 + i * 13), '\n'].join('');
    return unit.repeat(Math.ceil(100_000 / unit.length)).slice(0, 100_000 - i);
  };

  it('renders within the bound, every stream truncated with a truthful hint', () => {
    const limits = streamPreviewBudget(names.length, defaults);
    const view: OutputView = {
      kind: 'streams',
      manifest: MANIFEST,
      streams: names.map((name, i) => {
        const bytes = utf8(contentOf(i));
        const b = new PreviewBuilder(limits.maxLines, limits.maxBytes);
        for (let pos = 0; pos < bytes.length; pos += 64 * 1024) b.push(bytes.subarray(pos, pos + 64 * 1024));
        expect(b.allocatedBytes).toBeLessThanOrEqual(limits.maxBytes);
        return { name, preview: b.finish(bytes.length), total: totalsOf(bytes) };
      }),
    };
    const rendered = renderBoundedModelView(view, defaults.maxModelBytes);
    expect(byteLength(rendered)).toBeLessThanOrEqual(defaults.maxModelBytes);
    for (const [i, s] of view.streams.entries()) {
      expect(s.preview.truncated).toBe(true);
      expect(s.preview.bytes).toBeLessThanOrEqual(SHARE_OF_16);
      expect(s.preview.bytes).toBeGreaterThan(SHARE_OF_16 - 4);
      expect(rendered).toContain(
        `. Read more: read(filePath="artifact://${MANIFEST}/${s.name}", offset=${s.preview.offset})]\n`,
      );
      expectRoundTrip(contentOf(i), s.preview);
    }
  });

  it('reports ERESOURCELIMIT instead of cutting when previews ignore the budget', () => {
    const view: OutputView = {
      kind: 'streams',
      manifest: MANIFEST,
      streams: names.map((name, i) => ({
        name,
        preview: previewFromString(contentOf(i), 2000, 51200),
        total: totalsOf(contentOf(i)),
      })),
    };
    expect(byteLength(renderModelView(view))).toBeGreaterThan(defaults.maxModelBytes);
    expect(() => renderBoundedModelView(view, defaults.maxModelBytes)).toThrow(
      expect.objectContaining({ code: 'ERESOURCELIMIT' }),
    );
  });
});

describe('the worst case stays within the bound', () => {
  it('16 streams, 64-byte names, the widest counts, cut head lines and tails fill at most the bound', () => {
    const names = Array.from({ length: 16 }, (_, i) => `${String(i).padStart(2, '0')}${'w'.repeat(62)}`);
    const maxModelBytes = minModelViewBytes(16, 9999) - 16 * MIN_STREAM_PREVIEW_BYTES + 16 * 5000;
    const limits = streamPreviewBudget(16, { maxLines: 9999, maxBytes: 51200, maxModelBytes });
    expect(limits).toEqual({ maxLines: 9999, maxBytes: 5000 });
    // A head of 2499 newlines and a cut line, a tail without its final newline: 5000 bytes in all.
    const head = previewFromString(`${'\n'.repeat(2499)}${'x'.repeat(3000)}`, limits.maxLines, 2500);
    const tail = { text: 'y'.repeat(2500), startLine: WIDEST - 1, omittedBytes: WIDEST };
    const view: OutputView = {
      kind: 'streams',
      manifest: MANIFEST,
      streams: names.map((name) => ({ name, preview: head, total: { bytes: WIDEST, lines: WIDEST }, tail })),
    };
    const rendered = renderBoundedModelView(view, maxModelBytes);
    expect(head).toMatchObject({ bytes: 2500, offset: 2499, truncated: true });
    expect(byteLength(rendered)).toBeLessThanOrEqual(maxModelBytes);
    // The only slack is the digits the head's own counts (2499, 2500, 3000) do not use.
    expect(maxModelBytes - byteLength(rendered)).toBeLessThan(16 * 100);
  });
});

describe('aggregate bound check', () => {
  it('accepts a view exactly at the bound and rejects one byte over', () => {
    expect(assertModelViewWithinBound('é'.repeat(50), 100)).toBe(100);
    expect(() => assertModelViewWithinBound(`${'é'.repeat(50)}x`, 100)).toThrow(
      expect.objectContaining({ code: 'ERESOURCELIMIT', details: { bytes: 101, maxModelBytes: 100 } }),
    );
  });
});

describe('the aggregate bound holds for any declaration, names, limits and content', () => {
  const nameArb = fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/);
  const contentArb = fc
    .array(fc.oneof(fc.constant('\n'), fc.constantFrom('😀', '€', 'é', 'abc'), fc.string({ maxLength: 8 })), {
      maxLength: 60,
    })
    .map((p) => p.join(''));

  it('never renders past maxModelBytes and keeps every hint truthful', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(nameArb, contentArb), { minLength: 1, maxLength: 16, selector: ([n]) => n }),
        fc.integer({ min: 1, max: 99_999 }),
        fc.integer({ min: 1, max: 400 }),
        fc.integer({ min: 0, max: 3000 }),
        (entries, maxLines, maxBytes, extra) => {
          const maxModelBytes = minModelViewBytes(entries.length, maxLines) + extra;
          const opts = { maxLines, maxBytes, maxModelBytes };
          const limits = streamPreviewBudget(entries.length, opts);
          const view: OutputView = {
            kind: 'streams',
            manifest: MANIFEST,
            streams: entries.map(([name, c]) => ({
              name,
              preview: previewFromString(c, limits.maxLines, limits.maxBytes),
              total: totalsOf(c),
            })),
          };
          const rendered = renderBoundedModelView(view, maxModelBytes);
          expect(byteLength(rendered)).toBeLessThanOrEqual(maxModelBytes);
          for (const [i, s] of view.streams.entries()) expectRoundTrip((entries[i] as [string, string])[1], s.preview);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('holds for single output too', () => {
    fc.assert(
      fc.property(contentArb, fc.integer({ min: 1, max: 99_999 }), fc.integer({ min: 430, max: 2000 }), (c, l, b) => {
        const opts = { maxLines: l, maxBytes: 10_000, maxModelBytes: b };
        const limits = singlePreviewBudget(opts);
        const rendered = renderBoundedModelView(
          {
            kind: 'single',
            digest: MANIFEST,
            preview: previewFromString(c, limits.maxLines, limits.maxBytes),
            total: totalsOf(c),
          },
          b,
        );
        expect(byteLength(rendered)).toBeLessThanOrEqual(b);
      }),
      { numRuns: 300 },
    );
  });
});
