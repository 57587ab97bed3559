/**
 * More of the outputs the documentation shows, rendered from the code and
 * compared with the docs (documented-output.test.ts has the CLI's): the
 * read tool's page lines and the grep page of docs/read.md, and the SSE
 * frames of docs/http.md.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOSSY_NOTE, renderPageView } from '../../engine/presentation/page-view.js';
import { sseFrame } from '../../server/tracker.js';
import { formatSearchPage } from '../../store/search-text.js';
import { ROOT } from './helpers.js';

const doc = (name: string) => readFileSync(join(ROOT, 'docs', name), 'utf8');

/** The fenced blocks of `text`, each as its lines. */
function blocks(text: string): string[][] {
  const out: string[][] = [];
  let cur: string[] | undefined;
  for (const line of text.split('\n')) {
    if (line.trimStart().startsWith('```')) {
      if (cur) {
        out.push(cur);
        cur = undefined;
      } else cur = [];
    } else cur?.push(line);
  }
  return out;
}

describe('documented examples', () => {
  const read = doc('read.md');
  const readBlocks = blocks(read).map((b) => b.join('\n'));

  it("the read tool's continuation, long-line and lossy lines of docs/read.md", () => {
    const uri = 'artifact://<digest>/stdout';
    const more = renderPageView('', { filePath: uri, nextOffset: 2000, offset: 0, totalLines: 4000 });
    expect(readBlocks).toContain(more.trimEnd());
    const within = renderPageView('', { filePath: uri, nextOffset: 1, nextByteOffset: 2097152, offset: 1 });
    expect(readBlocks).toContain(within.trimEnd());
    expect(readBlocks).toContain(LOSSY_NOTE);
    const past = renderPageView('', { filePath: uri, offset: 200000, totalLines: 100000, nextOffset: null });
    expect(read).toContain(`\`${past.trimEnd()}\``);
  });

  it('the grep page of docs/read.md', () => {
    const page = formatSearchPage(
      {
        lines: [
          { line: 2997, text: '2998', match: false },
          { line: 2998, text: '2999', match: true },
          { line: 2999, text: '3000', match: false },
        ],
        matches: 1,
        context: 1,
        totalLines: 30000,
        nextOffset: null,
        longLines: 0,
        digest: '0'.repeat(64),
        stream: 'stdout',
      },
      'artifact://<d>/stdout',
      0,
    );
    expect(readBlocks).toContain(page.trimEnd());
  });

  it('the server-sent events of docs/http.md', () => {
    const http = blocks(doc('http.md')).find((b) => b[0] === 'retry: 1000');
    expect(http, 'the SSE example').toBeDefined();
    const callId = '7c0e…';
    const frames = [
      'retry: 1000\n\n',
      sseFrame(1, 'started', JSON.stringify({ type: 'started', callId, tool: 'bash', at: '2026-…', session: 'demo' })),
      sseFrame(2, 'display', JSON.stringify({ type: 'display', callId, text: '1\n2\n3\n' })),
      // The terminal result stands in for itself; the frame's head is the tracker's.
      sseFrame(
        3,
        'completed',
        `{"type":"completed","callId":${JSON.stringify(callId)},"result":{…the terminal result…}}`,
      ),
    ];
    expect(`${(http as string[]).join('\n')}\n`).toBe(frames.join(''));
  });
});
