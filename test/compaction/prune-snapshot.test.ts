/**
 * Rules 3 to 6 and 8: the exact content of the private retry snapshot.
 * Ordinary output becomes `read` references to the public artifact URIs
 * whatever its size or recency; every artifact read (tool `read`, `filePath`
 * with the artifact scheme, found by parsing the arguments) loses all of its
 * output to the one marker; filesystem reads and look-alikes are ordinary.
 * If a regression lets artifact text into the retry, the `not.toContain`
 * checks on the large page fail first.
 */
import { describe, expect, it } from 'vitest';
import {
  ARTIFACT_READ_OMITTED,
  ContextLengthError,
  compact,
  type HistoryItem,
  type SummarizerInput,
} from '../../engine/index.js';
import { call, linesOf, pageRef, result, scripted, sha, singleRef, streamsRef, summary, user } from './support.js';

/** Runs compaction with a first trial rejected for context length; returns the retry's input. */
async function retryInput(h: HistoryItem[], keepRecent: number): Promise<SummarizerInput> {
  const before = structuredClone(h);
  const s = scripted({ throws: new ContextLengthError('too long') }, { returns: 'S2' });
  const r = await compact(h, s.summarizer, { keepRecent });
  expect(h).toEqual(before);
  if (!r.ok) throw new Error(`compaction failed: ${r.reason}`);
  expect(r.kept).toBe(keepRecent);
  r.history.slice(1).forEach((item, i) => {
    expect(item).toBe(h[h.length - keepRecent + i]);
  });
  expect(s.inputs).toHaveLength(2);
  const input = s.inputs[1]!;
  expect(input.pruned).toBe(true);
  // Pairing: same items, same order, same ids; calls unchanged.
  const active = h.slice(
    Math.max(
      0,
      h.findLastIndex((i) => i.type === 'summary'),
    ),
  );
  expect(input.items.map((i) => [i.type, 'callId' in i ? i.callId : null])).toEqual(
    active.map((i) => [i.type, 'callId' in i ? i.callId : null]),
  );
  input.items.forEach((item, i) => {
    if (item.type !== 'tool_result') expect(item).toEqual(active[i]);
  });
  return input;
}

const D1 = sha('a single artifact');
const GONE = sha('deleted artifact');
const PAGE_LINE = `${'x'.repeat(255)}\n`;
/** A 256 KiB artifact page, the kind of copy the retry must not carry. */
const LARGE = PAGE_LINE.repeat(1024);

describe('ordinary output in the retry snapshot', () => {
  const BIG = 'build line\n'.repeat(3000);
  const make = streamsRef([
    ['stdout', BIG],
    ['stderr', 'warning\n'],
  ]);
  const ls = streamsRef([
    ['stdout', 'a\nb\n'],
    ['stderr', ''],
  ]);
  const M = make.kind === 'streams' ? make.manifest : '';
  const M2 = ls.kind === 'streams' ? ls.manifest : '';
  const T = sha('<html>\n');

  const history = (): HistoryItem[] => [
    summary('S1'),
    call('b1', 'bash', { command: 'make' }),
    result('b1', {
      status: 'failed',
      model: `[stdout]\nbuild line\n[Truncated. Read more: read(filePath="artifact://${M}/stdout", offset=1)]\n\n[stderr]\nwarning\n[Status: failed. exit code 2.]\n`,
      output: make,
      metadata: { exitCode: 2 },
    }),
    call('t1', 'fetch', { url: 'https://example.org' }),
    result('t1', {
      model: '<html>\n',
      output: singleRef('<html>\n'),
      attachments: [{ mediaType: 'image/png', data: 'iVBORw0KGgo=', name: 'shot.png' }],
      messages: [{ role: 'system', content: 'fetched 1 page' }],
    }),
    user('recent'),
    call('b2', 'bash', { command: 'ls' }),
    result('b2', { model: '[stdout]\na\nb\n\n[stderr]\n(empty)\n', output: ls }),
  ];

  it('replaces single and per-stream output with read references, old and recent, large and small', async () => {
    const input = await retryInput(history(), 3);
    expect(input.text).toBe(`[prior summary]
S1

[tool call b1: bash]
{"command":"make"}

[tool result b1: failed]
[stdout]
[Output omitted for compaction. Stored stream (33000 bytes, 3000 lines): read(filePath="artifact://${M}/stdout")]

[stderr]
[Output omitted for compaction. Stored stream (8 bytes, 1 line): read(filePath="artifact://${M}/stderr")]
[metadata] {"exitCode":2}

[tool call t1: fetch]
{"url":"https://example.org"}

[tool result t1: success]
[Output omitted for compaction. Stored output (7 bytes, 1 line): read(filePath="artifact://${T}")]
[attachment] image/png "shot.png", 12 characters of data
[emitted system message]
fetched 1 page

[user]
recent

[tool call b2: bash]
{"command":"ls"}

[tool result b2: success]
[stdout]
[Output omitted for compaction. Stored stream (4 bytes, 2 lines): read(filePath="artifact://${M2}/stdout")]

[stderr]
[Output omitted for compaction. Stored stream (0 bytes, 0 lines): read(filePath="artifact://${M2}/stderr")]
`);
  });

  it('keeps the output reference, status, metadata, attachments and messages of ordinary results', async () => {
    const h = history();
    const input = await retryInput(h, 3);
    const t1 = input.items[4];
    expect(t1).toEqual({ ...h[4], model: expect.stringContaining(`read(filePath="artifact://${T}")`) });
  });
});

describe('artifact reads in the retry snapshot', () => {
  const M = sha('a manifest');
  const history = (): HistoryItem[] => [
    summary('S1'),
    call('r1', 'read', { filePath: `artifact://${D1}`, offset: 0, limit: 2000 }),
    result('r1', {
      model: LARGE,
      output: pageRef(LARGE),
      metadata: { offset: 0, lines: 1024, totalLines: 5000, nextOffset: 1024 },
      attachments: [{ mediaType: 'image/png', data: 'iVBORw0KGgo=', name: 'copy.png' }],
      messages: [{ role: 'system', content: 'artifact text copy' }],
    }),
    call('r2', 'read', { filePath: `artifact://${M}/stdout` }),
    result('r2', { model: 'tiny\n', output: pageRef('tiny\n'), metadata: { offset: 0 } }),
    call('r3', 'read', { filePath: `artifact://${M}` }),
    result('r3', { model: '{"streams":[]}', output: pageRef('{"streams":[]}') }),
    call('r4', 'read', `{"filePath": "artifact://${M}/stderr", "offset": 3}`),
    result('r4', { model: 'stderr page\n', output: pageRef('stderr page\n') }),
    call('r5', 'read', { filePath: `artifact://${GONE}` }),
    result('r5', {
      status: 'failed',
      model: '[Status: failed. ENOTFOUND: no such artifact.]\n',
      error: { code: 'ENOTFOUND', message: 'no such artifact', details: { digest: GONE } },
    }),
    call('r6', 'read', { filePath: `ARTIFACT://${D1}` }),
    result('r6', {
      status: 'failed',
      model: '[Status: failed. EBADURI: bad scheme case.]\n',
      error: { code: 'EBADURI', message: 'bad scheme case' },
    }),
    user('recent'),
    call('r7', 'read', { filePath: `artifact://${M}/stdout`, offset: 100 }),
    result('r7', {
      model: LARGE,
      output: pageRef(LARGE),
      metadata: { offset: 100 },
      messages: [{ role: 'user', content: 'recent copy' }],
    }),
  ];

  it('omits all output of every artifact read, every stream and size, recent ones included', async () => {
    const input = await retryInput(history(), 3);
    expect(input.text).toBe(`[prior summary]
S1

[tool call r1: read]
{"filePath":"artifact://${D1}","offset":0,"limit":2000}

[tool result r1: success]
${ARTIFACT_READ_OMITTED}

[tool call r2: read]
{"filePath":"artifact://${M}/stdout"}

[tool result r2: success]
${ARTIFACT_READ_OMITTED}

[tool call r3: read]
{"filePath":"artifact://${M}"}

[tool result r3: success]
${ARTIFACT_READ_OMITTED}

[tool call r4: read]
{"filePath":"artifact://${M}/stderr","offset":3}

[tool result r4: success]
${ARTIFACT_READ_OMITTED}

[tool call r5: read]
{"filePath":"artifact://${GONE}"}

[tool result r5: failed]
${ARTIFACT_READ_OMITTED}

[tool call r6: read]
{"filePath":"ARTIFACT://${D1}"}

[tool result r6: failed]
${ARTIFACT_READ_OMITTED}

[user]
recent

[tool call r7: read]
{"filePath":"artifact://${M}/stdout","offset":100}

[tool result r7: success]
${ARTIFACT_READ_OMITTED}
`);
    expect(input.text).not.toContain(PAGE_LINE);
    expect(input.text.length).toBeLessThan(2000);
  });

  it('leaves nothing of their output in the items: the exact marker, no reference, metadata, attachments or messages', async () => {
    const input = await retryInput(history(), 3);
    const results = input.items.filter((i) => i.type === 'tool_result');
    expect(results).toHaveLength(7);
    for (const r of results) {
      expect(r).toEqual({
        type: 'tool_result',
        callId: r.callId,
        status: r.callId === 'r5' || r.callId === 'r6' ? 'failed' : 'success',
        complete: true,
        model: '[artifact read output omitted for compaction]',
        output: null,
        metadata: {},
        attachments: [],
        messages: [],
      });
    }
  });

  it('keeps the first trial complete: the artifact pages are there before pruning', async () => {
    const s = scripted({ throws: new ContextLengthError('too long') }, { returns: 'S2' });
    await compact(history(), s.summarizer, { keepRecent: 3 });
    expect(s.inputs[0]?.text).toContain(`[tool result r1: success]\n${LARGE}[metadata]`);
    expect(s.inputs[0]?.text).toContain('[emitted user message]\nrecent copy\n');
  });
});

describe('filesystem reads and look-alikes in the retry snapshot', () => {
  const page = (text: string) => ({ model: text, output: pageRef(text) });
  const badArgs = (message: string) => ({
    status: 'failed' as const,
    model: `[Status: failed. EBADARGS: ${message}.]\n`,
    error: { code: 'EBADARGS' as const, message },
  });
  const history = (): HistoryItem[] => [
    call('f1', 'read', { filePath: '/tmp/artifact://x' }),
    result('f1', { ...page('1\tinside a directory named artifact:\n'), metadata: { path: '/tmp/artifact://x' } }),
    call('f2', 'read', { filePath: 'notes-artifact://.txt' }),
    result('f2', page('1\tnotes\n')),
    call('f3', 'read', '{"filePath":"/etc/hosts","limit":10}'),
    result('f3', page('1\t127.0.0.1 localhost\n')),
    call('f4', 'read', { filePath: ` artifact://${D1}` }),
    result('f4', badArgs('no such file')),
    call('g1', 'find_text', { filePath: `artifact://${D1}`, pattern: 'TODO' }),
    result('g1', { model: '3: TODO\n', output: singleRef('3: TODO\n') }),
    call('x1', 'read', { path: `artifact://${D1}` }),
    result('x1', badArgs('filePath is required')),
    call('x2', 'read', { filePath: '/srv/app.log', note: `artifact://${D1}` }),
    result('x2', page('1\tlog line\n')),
    call('x3', 'read', { filePath: { uri: `artifact://${D1}` } }),
    result('x3', badArgs('filePath must be a string')),
    call('x4', 'read', `{"filePath": "/tmp/a", "comment": "artifact://${D1}"}`),
    result('x4', page('1\ta\n')),
    call('x5', 'read', `{not json "filePath": "artifact://${D1}"`),
    result('x5', badArgs('arguments are not JSON')),
    call('x6', 'read', `["artifact://${D1}"]`),
    result('x6', badArgs('arguments must be an object')),
  ];

  it('treats them as ordinary output: page markers, or markers for results with nothing stored', async () => {
    const input = await retryInput(history(), 0);
    const noArtifact = (model: string) =>
      `[Output omitted for compaction (${Buffer.byteLength(model)} bytes of model text); no artifact was stored for it]`;
    const pageMarker = (text: string) =>
      `[Page output omitted for compaction (${Buffer.byteLength(text)} bytes, ${linesOf(text)} line); it was not stored as an artifact]`;
    expect(input.text).toBe(`[tool call f1: read]
{"filePath":"/tmp/artifact://x"}

[tool result f1: success]
${pageMarker('1\tinside a directory named artifact:\n')}
[metadata] {"path":"/tmp/artifact://x"}

[tool call f2: read]
{"filePath":"notes-artifact://.txt"}

[tool result f2: success]
${pageMarker('1\tnotes\n')}

[tool call f3: read]
{"filePath":"/etc/hosts","limit":10}

[tool result f3: success]
${pageMarker('1\t127.0.0.1 localhost\n')}

[tool call f4: read]
{"filePath":" artifact://${D1}"}

[tool result f4: failed]
${noArtifact('[Status: failed. EBADARGS: no such file.]\n')}
[error] EBADARGS: no such file

[tool call g1: find_text]
{"filePath":"artifact://${D1}","pattern":"TODO"}

[tool result g1: success]
[Output omitted for compaction. Stored output (8 bytes, 1 line): read(filePath="artifact://${sha('3: TODO\n')}")]

[tool call x1: read]
{"path":"artifact://${D1}"}

[tool result x1: failed]
${noArtifact('[Status: failed. EBADARGS: filePath is required.]\n')}
[error] EBADARGS: filePath is required

[tool call x2: read]
{"filePath":"/srv/app.log","note":"artifact://${D1}"}

[tool result x2: success]
${pageMarker('1\tlog line\n')}

[tool call x3: read]
{"filePath":{"uri":"artifact://${D1}"}}

[tool result x3: failed]
${noArtifact('[Status: failed. EBADARGS: filePath must be a string.]\n')}
[error] EBADARGS: filePath must be a string

[tool call x4: read]
{"filePath":"/tmp/a","comment":"artifact://${D1}"}

[tool result x4: success]
${pageMarker('1\ta\n')}

[tool call x5: read]
{not json "filePath": "artifact://${D1}"

[tool result x5: failed]
${noArtifact('[Status: failed. EBADARGS: arguments are not JSON.]\n')}
[error] EBADARGS: arguments are not JSON

[tool call x6: read]
["artifact://${D1}"]

[tool result x6: failed]
${noArtifact('[Status: failed. EBADARGS: arguments must be an object.]\n')}
[error] EBADARGS: arguments must be an object
`);
    expect(input.text).not.toContain(ARTIFACT_READ_OMITTED);
  });

  it('parses JSON-string arguments structurally, however they are spaced or ordered', async () => {
    const h: HistoryItem[] = [
      call('s1', 'read', `{\n  "limit": 5,\n  "filePath": "artifact://${D1}"\n}`),
      result('s1', page('secret page\n')),
      call('s2', 'read', `{"filePath":"artifact:\\/\\/${D1}"}`),
      result('s2', page('escaped slashes\n')),
      call('s3', 'read', `{"filePath":"\\/tmp\\/x","other":"{\\"filePath\\":\\"artifact://${D1}\\"}"}`),
      result('s3', page('fs page\n')),
    ];
    const input = await retryInput(h, 0);
    const [, r1, , r2, , r3] = input.items;
    expect(r1).toMatchObject({ model: ARTIFACT_READ_OMITTED, output: null });
    // JSON escapes decode to the artifact URI: structurally it is one.
    expect(r2).toMatchObject({ model: ARTIFACT_READ_OMITTED, output: null });
    // An artifact URI nested inside another argument's serialised JSON is not the filePath.
    expect(r3).toMatchObject({ model: expect.stringContaining('[Page output omitted'), output: pageRef('fs page\n') });
    expect(input.text).not.toContain('secret page');
    expect(input.text).not.toContain('escaped slashes');
  });

  it('does not take an own __proto__ argument for filePath', async () => {
    const args = JSON.parse(`{"__proto__":{"filePath":"artifact://${D1}"},"limit":1}`);
    const h: HistoryItem[] = [call('p1', 'read', args), result('p1', page('1\tx\n'))];
    const input = await retryInput(h, 0);
    expect(input.items[1]).toMatchObject({ output: pageRef('1\tx\n') });
    expect(input.text).toContain(`{"__proto__":{"filePath":"artifact://${D1}"},"limit":1}`);
  });
});

describe('results without stored output', () => {
  it('say so truthfully: a disk error keeps its status and error, never a fake reference', async () => {
    const h: HistoryItem[] = [
      call('d1', 'bash', { command: 'yes' }),
      result('d1', {
        status: 'failed',
        complete: false,
        model: '[Status: failed. EDISK: ENOSPC. Output is incomplete.]\n',
        error: { code: 'EDISK', message: 'ENOSPC', details: { errno: 'ENOSPC' } },
      }),
    ];
    const input = await retryInput(h, 0);
    expect(input.text).toBe(`[tool call d1: bash]
{"command":"yes"}

[tool result d1: failed, incomplete]
[Output omitted for compaction (55 bytes of model text); no artifact was stored for it]
[error] EDISK: ENOSPC
`);
    expect(input.items[1]).toMatchObject({ error: { code: 'EDISK', message: 'ENOSPC', details: { errno: 'ENOSPC' } } });
  });

  it('an incomplete result with stored output points at what was stored', async () => {
    const part = 'partial\n';
    const h: HistoryItem[] = [
      call('c1', 'slow', {}),
      result('c1', {
        status: 'cancelled',
        complete: false,
        model: `${part}[Status: cancelled. ECANCELLED: cancelled by the caller. Output is incomplete.]\n`,
        output: singleRef(part),
        error: { code: 'ECANCELLED', message: 'cancelled by the caller' },
      }),
    ];
    const input = await retryInput(h, 0);
    expect(input.text).toBe(`[tool call c1: slow]
{}

[tool result c1: cancelled, incomplete]
[Output omitted for compaction. Stored output (8 bytes, 1 line): read(filePath="artifact://${sha(part)}")]
[error] ECANCELLED: cancelled by the caller
`);
  });
});
