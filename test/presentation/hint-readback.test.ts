/**
 * The read hints of the model view, followed through the real store: publish
 * each stream and the manifest, render the view, then `read` every hint's URI
 * from its offset to the end. What the preview showed in full, followed by
 * those pages, must be the stream exactly: nothing skipped, nothing doubled.
 */
import { describe, expect, it } from 'vitest';
import { type OutputView, renderModelView } from '../../engine/presentation/model-view.js';
import { type Preview, PreviewBuilder } from '../../engine/presentation/preview.js';
import { encodeManifest } from '../../store/manifest.js';
import type { Store } from '../../store/store.js';
import { tempStore } from '../store/helpers.js';
import { totalsOf, utf8 } from './support.js';

const HINT =
  /^\[Truncated: [^\]]*\. Read more: read\(filePath="(artifact:\/\/[0-9a-f]{64}(?:\/[A-Za-z0-9._-]+)?)", offset=(\d+)\)\]$/;

function previewOf(content: string, maxLines: number, maxBytes: number): Preview {
  const bytes = utf8(content);
  const b = new PreviewBuilder(maxLines, maxBytes);
  // 3-byte chunks: boundaries fall inside multi-byte characters.
  for (let i = 0; i < bytes.length; i += 3) b.push(bytes.subarray(i, i + 3));
  return b.finish(bytes.length);
}

/** Everything `read` returns from `offset` to the end, page by page. */
async function readFrom(store: Store, uri: string, offset: number): Promise<string> {
  let out = '';
  let next: number | null = offset;
  while (next !== null) {
    const page = await store.readPage(uri, { offset: next, limit: 3 });
    out += page.content;
    next = page.nextOffset;
  }
  return out;
}

/** The URI and offset of every hint line in the rendered view, in order. */
function hintsOf(rendered: string): Array<{ uri: string; offset: number }> {
  return rendered
    .split('\n')
    .map((line) => HINT.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ uri: m[1] as string, offset: Number(m[2]) }));
}

const shownWhole = (p: Preview): string => p.text.slice(0, p.text.lastIndexOf('\n') + 1);

// Boundary cases: [content, maxLines, maxBytes].
const CASES: Array<[string, string, number, number]> = [
  ['line limit, one below', 'a\nb\nc\n', 2, 1000],
  ['byte limit cuts a line', 'first\nsecond line\nthird\n', 100, 10],
  ['byte limit just before a newline', 'abc\ndef', 100, 3],
  ['byte limit just after a newline', 'abc\ndef', 100, 4],
  ['no trailing newline', 'x'.repeat(30), 100, 7],
  ['CRLF cut between \\r and \\n', 'a\r\nb\r\nc\r\n', 100, 5],
  ['2-byte character straddling', 'abé\ncd\n', 100, 3],
  ['3-byte character straddling', 'ab€\ncd\n', 100, 4],
  ['4-byte character straddling', 'ab😀\ncd\n', 100, 5],
  ['first character wider than the limit', '😀😀\nz\n', 100, 3],
  ['both limits bind together', 'aaaa\nbbbb\ncccc\ndddd\n', 2, 10],
];

describe('read hints followed through the store', () => {
  it('single output: the bare URI from the offset continues exactly where the preview stopped', async () => {
    const store = await tempStore();
    for (const [label, content, maxLines, maxBytes] of CASES) {
      const blob = await store.publishBytes(content);
      const preview = previewOf(content, maxLines, maxBytes);
      const rendered = renderModelView({ kind: 'single', digest: blob.digest, preview, total: totalsOf(content) });
      const hints = hintsOf(rendered);
      expect(hints, label).toEqual([{ uri: `artifact://${blob.digest}`, offset: preview.offset }]);
      const [hint] = hints as [{ uri: string; offset: number }];
      expect(shownWhole(preview) + (await readFrom(store, hint.uri, hint.offset)), label).toBe(content);
    }
  });

  it('named streams: each truncated stream continues exactly; an untruncated sibling has no hint', async () => {
    const store = await tempStore();
    for (const [label, content, maxLines, maxBytes] of CASES) {
      const sibling = 'ok\n';
      const streams = [
        { name: 'stdout', content },
        { name: 'stderr', content: sibling },
        { name: 'empty', content: '' },
      ];
      const entries = [];
      for (const s of streams) entries.push({ name: s.name, ...(await store.publishBytes(s.content)) });
      const manifest = await store.publishBytes(
        encodeManifest(entries.map(({ name, digest, bytes, lines }) => ({ name, digest, bytes, lines }))),
      );
      const view: OutputView = {
        kind: 'streams',
        manifest: manifest.digest,
        streams: streams.map((s) => ({
          name: s.name,
          preview: previewOf(s.content, maxLines, maxBytes),
          total: totalsOf(s.content),
        })),
      };
      const rendered = renderModelView(view);
      const hints = hintsOf(rendered);
      const stdout = view.streams[0]?.preview as Preview;
      expect(hints, label).toEqual([{ uri: `artifact://${manifest.digest}/stdout`, offset: stdout.offset }]);
      expect(rendered, label).toContain('[stderr]\nok\n');
      expect(rendered, label).toContain('[empty]\n(empty)\n');
      const [hint] = hints as [{ uri: string; offset: number }];
      expect(shownWhole(stdout) + (await readFrom(store, hint.uri, hint.offset)), label).toBe(content);
    }
  });
});
