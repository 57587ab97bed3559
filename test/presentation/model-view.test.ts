import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type OutputView, readHint, renderModelView, tailMarker } from '../../engine/presentation/model-view.js';
import { type Preview, previewFromString } from '../../engine/presentation/preview.js';
import { expectRoundTrip, linesOf, totalsOf } from './support.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const OUT = sha('single output');
const MANIFEST = sha('manifest');

function single(content: string, maxLines: number, maxBytes: number): OutputView {
  return {
    kind: 'single',
    digest: OUT,
    preview: previewFromString(content, maxLines, maxBytes),
    total: totalsOf(content),
  };
}

function streams(entries: Array<[name: string, content: string]>, maxLines: number, maxBytes: number): OutputView {
  return {
    kind: 'streams',
    manifest: MANIFEST,
    streams: entries.map(([name, content]) => ({
      name,
      preview: previewFromString(content, maxLines, maxBytes),
      total: totalsOf(content),
    })),
  };
}

describe('model view of single output', () => {
  it('is the preview text alone when the output fits', () => {
    expect(renderModelView(single('hello\nworld\n', 10, 100))).toBe('hello\nworld\n');
  });

  it('keeps a missing trailing newline as is when the output fits', () => {
    expect(renderModelView(single('hello', 10, 100))).toBe('hello');
  });

  it('is empty for empty output', () => {
    expect(renderModelView(single('', 10, 100))).toBe('');
  });

  it('adds the hint line with the bare artifact URI after a preview ending in a newline', () => {
    const view = renderModelView(single('l1\nl2\nl3\nl4\n', 2, 100));
    expect(view).toBe(
      `l1\nl2\n[Truncated: lines 1-2 of 4 shown (12 B total). Read more: read(filePath="artifact://${OUT}", offset=2)]\n`,
    );
  });

  it('puts the hint on its own line after a cut line, and its offset re-reads that line', () => {
    const view = renderModelView(single('l1\nlong line two\nl3\n', 10, 8));
    expect(view).toBe(
      `l1\nlong \n[Truncated: line 1 of 3 shown, line 2 cut after 5 bytes (20 B total). Read more: read(filePath="artifact://${OUT}", offset=1)]\n`,
    );
  });

  it('shows only the hint when not even the first character fits', () => {
    expect(renderModelView(single('😀', 10, 3))).toBe(
      `[Truncated: 0 lines of 1 shown (4 B total). Read more: read(filePath="artifact://${OUT}", offset=0)]\n`,
    );
  });
});

describe('model view of named streams', () => {
  it('renders each stream under its heading, blocks separated by one empty line', () => {
    const view = renderModelView(
      streams(
        [
          ['stdout', 'built 3 targets\n'],
          ['stderr', 'warning: unused\n'],
        ],
        10,
        100,
      ),
    );
    expect(view).toBe('[stdout]\nbuilt 3 targets\n\n[stderr]\nwarning: unused\n');
  });

  it('gives a read hint only to the truncated stream, addressed by manifest digest and name', () => {
    const stdout = 'line 1\nline 2\nline 3\nline 4\n';
    const view = renderModelView(
      streams(
        [
          ['stdout', stdout],
          ['stderr', 'one warning\n'],
        ],
        2,
        100,
      ),
    );
    expect(view).toBe(
      '[stdout]\n' +
        'line 1\nline 2\n' +
        `[Truncated: lines 1-2 of 4 shown (28 B total). Read more: read(filePath="artifact://${MANIFEST}/stdout", offset=2)]\n` +
        '\n' +
        '[stderr]\n' +
        'one warning\n',
    );
  });

  it('terminates a preview without a trailing newline before the next block or hint', () => {
    const view = renderModelView(
      streams(
        [
          ['results', 'no newline at end'],
          ['diagnostics', 'abcdefghij'],
        ],
        10,
        5,
      ),
    );
    expect(view).toBe(
      '[results]\nno ne\n' +
        `[Truncated: 0 lines of 1 shown, line 1 cut after 5 bytes (17 B total). Read more: read(filePath="artifact://${MANIFEST}/results", offset=0)]\n` +
        '\n[diagnostics]\nabcde\n' +
        `[Truncated: 0 lines of 1 shown, line 1 cut after 5 bytes (10 B total). Read more: read(filePath="artifact://${MANIFEST}/diagnostics", offset=0)]\n`,
    );
    const fits = renderModelView(streams([['results', 'no newline at end']], 10, 100));
    expect(fits).toBe('[results]\nno newline at end\n');
  });

  it('marks an empty stream with (empty) and keeps it in place', () => {
    const view = renderModelView(
      streams(
        [
          ['stdout', ''],
          ['stderr', 'boom\n'],
          ['trace', ''],
        ],
        10,
        100,
      ),
    );
    expect(view).toBe('[stdout]\n(empty)\n\n[stderr]\nboom\n\n[trace]\n(empty)\n');
  });

  it('shows a stream holding one empty line as an empty line, not as (empty)', () => {
    expect(renderModelView(streams([['stdout', '\n']], 10, 100))).toBe('[stdout]\n\n');
  });

  it('keeps declaration order, not alphabetical order', () => {
    const view = renderModelView(
      streams(
        [
          ['zeta', 'z\n'],
          ['alpha', 'a\n'],
        ],
        10,
        100,
      ),
    );
    expect(view).toBe('[zeta]\nz\n\n[alpha]\na\n');
  });

  it('renders a truncated stream whose preview is empty as heading and hint', () => {
    const view = renderModelView(streams([['out', '😀😀']], 10, 2));
    expect(view).toBe(
      `[out]\n[Truncated: 0 lines of 1 shown (8 B total). Read more: read(filePath="artifact://${MANIFEST}/out", offset=0)]\n`,
    );
  });
});

describe('model view hints are truthful', () => {
  const HINT =
    /^\[Truncated: [^\]]*\. Read more: read\(filePath="artifact:\/\/([0-9a-f]{64})(?:\/([^"]+))?", offset=(\d+)\)\]$/;

  it('every hint offset, read back from the stream, continues exactly where the preview stopped', () => {
    const contents: Record<string, string> = {
      lines: Array.from({ length: 50 }, (_, i) => `line ${i}\n`).join(''),
      cut: 'short\na much longer line that the byte limit cuts\nafter\n',
      crlf: 'a\r\nb\r\nc\r\nd\r\n',
      wide: 'ab€€€\n😀😀😀\nééé\n',
      nonl: 'x'.repeat(40),
    };
    for (const [maxLines, maxBytes] of [
      [3, 1000],
      [1000, 9],
      [2, 7],
      [1, 1],
      [5, 14],
    ] as const) {
      const view: OutputView = {
        kind: 'streams',
        manifest: MANIFEST,
        streams: Object.entries(contents).map(([name, c]) => ({
          name,
          preview: previewFromString(c, maxLines, maxBytes),
          total: totalsOf(c),
        })),
      };
      const rendered = renderModelView(view);
      const hints = rendered.split('\n').filter((l) => l.startsWith('[Truncated:'));
      const truncated = view.streams.filter((s) => s.preview.truncated);
      expect(hints).toHaveLength(truncated.length);
      for (const hint of hints) {
        const m = HINT.exec(hint);
        expect(m).not.toBeNull();
        const [, digest, name, offset] = m as RegExpExecArray;
        expect(digest).toBe(MANIFEST);
        const original = contents[name as string] as string;
        const p = previewFromString(original, maxLines, maxBytes);
        expect(Number(offset)).toBe(p.offset);
        expectRoundTrip(original, p);
        // The reader's view: what the preview showed in full, then the read from the offset.
        const shownWhole = p.text.slice(0, p.text.lastIndexOf('\n') + 1);
        expect(shownWhole + linesOf(original).slice(Number(offset)).join('')).toBe(original);
      }
    }
  });

  const lines = (n: number, rest = ''): Preview => ({
    text: 'x\n'.repeat(n) + rest,
    bytes: 2 * n + rest.length,
    lines: n + (rest ? 1 : 0),
    truncated: true,
    offset: n,
  });

  it('states the totals of a line-cut stream, the read call exactly as the spec writes it', () => {
    expect(readHint(`artifact://${MANIFEST}/stdout`, lines(2000), { bytes: 588800, lines: 100000 })).toBe(
      `[Truncated: lines 1-2000 of 100000 shown (575.0 KiB total). Read more: read(filePath="artifact://${MANIFEST}/stdout", offset=2000)]`,
    );
  });

  it('states the cut line and the totals of a byte-cut stream', () => {
    expect(readHint(`artifact://${OUT}`, lines(1, 'bcd'), { bytes: 3 * 1024 * 1024, lines: 10 })).toBe(
      `[Truncated: line 1 of 10 shown, line 2 cut after 3 bytes (3.0 MiB total). Read more: read(filePath="artifact://${OUT}", offset=1)]`,
    );
    expect(readHint(`artifact://${OUT}`, lines(0, 'b'), { bytes: 70000, lines: 1 })).toBe(
      `[Truncated: 0 lines of 1 shown, line 1 cut after 1 byte (68.3 KiB total). Read more: read(filePath="artifact://${OUT}", offset=0)]`,
    );
  });

  it('names the omitted middle of a head+tail preview, and the tail marker gives its zero-based start', () => {
    const tail = { text: 'end\n', startLine: 99000, omittedBytes: 560000 };
    expect(readHint(`artifact://${OUT}`, lines(1000), { bytes: 588800, lines: 100000 }, tail)).toBe(
      `[Truncated: lines 1-1000 and 99001-100000 of 100000 shown; lines 1001-99000 (546.8 KiB) omitted (575.0 KiB total). Read more: read(filePath="artifact://${OUT}", offset=1000)]`,
    );
    expect(tailMarker(99000)).toBe('[Tail: from offset=99000 to the end]');
  });
});

describe('model view input validation', () => {
  const p = previewFromString('x', 1, 1);

  it('rejects a digest that is not 64 lowercase hex with EBADURI', () => {
    for (const digest of ['abc', OUT.toUpperCase(), `${OUT}0`, `sha256/${OUT}`]) {
      expect(() => renderModelView({ kind: 'single', digest, preview: p, total: totalsOf('x') })).toThrow(
        expect.objectContaining({ code: 'EBADURI' }),
      );
      expect(() =>
        renderModelView({
          kind: 'streams',
          manifest: digest,
          streams: [{ name: 'a', preview: p, total: totalsOf('x') }],
        }),
      ).toThrow(expect.objectContaining({ code: 'EBADURI' }));
    }
  });

  it('rejects invalid, duplicate or missing stream names with EBADDECL', () => {
    for (const names of [['a/b'], ['..'], [''], ['x'.repeat(65)], ['ok', 'ok'], []]) {
      const view: OutputView = {
        kind: 'streams',
        manifest: MANIFEST,
        streams: names.map((name) => ({ name, preview: p, total: totalsOf('x') })),
      };
      expect(() => renderModelView(view)).toThrow(expect.objectContaining({ code: 'EBADDECL' }));
    }
  });
});
