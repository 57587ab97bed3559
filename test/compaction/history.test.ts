/**
 * The model history built from terminal results (what sessions produce):
 * exact items, copies that share nothing with their inputs, arguments kept in
 * the form they arrived in, and the schema that guards the boundary.
 */
import { describe, expect, it } from 'vitest';
import {
  ARTIFACT_READ_OMITTED,
  ContextLengthError,
  compact,
  historyFromCalls,
  historySchema,
  isArtifactRead,
  parseHistory,
  type TerminalResult,
} from '../../engine/index.js';
import { pageRef, scripted, sha, streamsRef } from './support.js';

function terminal(fields: Partial<TerminalResult> & Pick<TerminalResult, 'callId' | 'tool'>): TerminalResult {
  return {
    status: 'success',
    complete: true,
    display: 'display text is UI only',
    model: '',
    output: null,
    metadata: {},
    attachments: [],
    messages: [],
    startedAt: '2025-01-01T00:00:00.000Z',
    durationMs: 5,
    ...fields,
  };
}

const bashOut = streamsRef([
  ['stdout', 'hello\n'],
  ['stderr', ''],
]);
const M = bashOut.kind === 'streams' ? bashOut.manifest : '';

describe('historyFromCalls', () => {
  it('builds a call item then a result item per call, from the model view, never the display', () => {
    const bash = terminal({
      callId: 'c1',
      tool: 'bash',
      model: '[stdout]\nhello\n\n[stderr]\n(empty)\n',
      output: bashOut,
      metadata: { exitCode: 0, dropped: undefined },
      attachments: [{ mediaType: 'image/png', data: 'iVBORw0KGgo=' }],
      messages: [{ role: 'system', content: 'ran in /tmp' }],
    });
    const read = terminal({
      callId: 'c2',
      tool: 'read',
      status: 'failed',
      model: '[Status: failed. ENOTFOUND: gone.]\n',
      error: { code: 'ENOTFOUND', message: 'gone', details: { digest: sha('x') } },
    });
    const args = { command: 'echo hello', env: { A: '1' } };
    const items = historyFromCalls([
      { tool: 'bash', args, result: bash },
      { tool: 'read', args: `{"filePath":"artifact://${M}/stdout"}`, result: read },
    ]);
    expect(items).toEqual([
      { type: 'tool_call', callId: 'c1', tool: 'bash', args: { command: 'echo hello', env: { A: '1' } } },
      {
        type: 'tool_result',
        callId: 'c1',
        status: 'success',
        complete: true,
        model: '[stdout]\nhello\n\n[stderr]\n(empty)\n',
        output: bashOut,
        metadata: { exitCode: 0 },
        attachments: [{ mediaType: 'image/png', data: 'iVBORw0KGgo=' }],
        messages: [{ role: 'system', content: 'ran in /tmp' }],
      },
      { type: 'tool_call', callId: 'c2', tool: 'read', args: `{"filePath":"artifact://${M}/stdout"}` },
      {
        type: 'tool_result',
        callId: 'c2',
        status: 'failed',
        complete: true,
        model: '[Status: failed. ENOTFOUND: gone.]\n',
        output: null,
        error: { code: 'ENOTFOUND', message: 'gone', details: { digest: sha('x') } },
        metadata: {},
        attachments: [],
        messages: [],
      },
    ]);
    expect(Object.hasOwn((items[1] as { metadata: object }).metadata, 'dropped')).toBe(false);
    expect(JSON.stringify(items)).not.toContain('display text is UI only');
  });

  it('shares nothing with its inputs', () => {
    const args = { command: 'ls', nested: { a: [1] } };
    const result = terminal({
      callId: 'c1',
      tool: 'bash',
      output: structuredClone(bashOut),
      metadata: { m: { n: 1 } },
    });
    const items = historyFromCalls([{ tool: 'bash', args, result }]);
    args.nested.a.push(2);
    (result.metadata.m as { n: number }).n = 9;
    if (result.output?.kind === 'streams') result.output.streams[0]!.bytes = 999;
    expect(items[0]).toMatchObject({ args: { command: 'ls', nested: { a: [1] } } });
    expect(items[1]).toMatchObject({
      metadata: { m: { n: 1 } },
      output: streamsRef([
        ['stdout', 'hello\n'],
        ['stderr', ''],
      ]),
    });
  });

  it.each([
    ['a tool name that differs from the result', { tool: 'grep', args: {} }],
    ['arguments that are a number', { tool: 'bash', args: 7 }],
    ['arguments that are an array', { tool: 'bash', args: ['ls'] }],
    ['arguments with a BigInt', { tool: 'bash', args: { n: 1n } }],
  ])('refuses %s with EBADARGS', (_label, c) => {
    expect(() => historyFromCalls([{ ...c, result: terminal({ callId: 'c1', tool: 'bash' }) }])).toThrow(
      expect.objectContaining({ code: 'EBADARGS' }),
    );
  });

  it('feeds compaction: an artifact read from string arguments is recognised and omitted in the retry', async () => {
    const items = historyFromCalls([
      {
        tool: 'bash',
        args: { command: 'echo hello' },
        result: terminal({ callId: 'c1', tool: 'bash', model: 'hello\n', output: bashOut }),
      },
      {
        tool: 'read',
        args: JSON.stringify({ filePath: `artifact://${M}/stdout` }),
        result: terminal({ callId: 'c2', tool: 'read', model: 'hello\n', output: pageRef('hello\n') }),
      },
    ]);
    expect(isArtifactRead(items[2] as never)).toBe(true);
    const s = scripted({ throws: new ContextLengthError('too long') }, { returns: 'S' });
    await compact(items, s.summarizer, { keepRecent: 0 });
    expect(s.inputs[1]?.text).toBe(`[tool call c1: bash]
{"command":"echo hello"}

[tool result c1: success]
[stdout]
[Output omitted for compaction. Stored stream (6 bytes, 1 line): read(filePath="artifact://${M}/stdout")]

[stderr]
[Output omitted for compaction. Stored stream (0 bytes, 0 lines): read(filePath="artifact://${M}/stderr")]

[tool call c2: read]
{"filePath":"artifact://${M}/stdout"}

[tool result c2: success]
${ARTIFACT_READ_OMITTED}
`);
  });
});

describe('the history schema', () => {
  it('round-trips through JSON: a history read back from a log is the same history', () => {
    const items = historyFromCalls([
      {
        tool: 'bash',
        args: { command: 'ls' },
        result: terminal({ callId: 'c1', tool: 'bash', output: bashOut, metadata: { exitCode: 0 } }),
      },
    ]);
    const back = JSON.parse(JSON.stringify(items));
    expect(parseHistory(back)).toEqual(items);
    expect(historySchema.safeParse(back).success).toBe(true);
  });

  it('returns the same array it was given, not a copy', () => {
    const items = [{ type: 'user', content: 'x' }];
    expect(parseHistory(items)).toBe(items);
  });

  it('tolerates unknown keys on items (best-effort reading of saved data)', () => {
    expect(() => parseHistory([{ type: 'user', content: 'x', at: '2025-01-01' }])).not.toThrow();
    expect(parseHistory([{ type: 'user', content: 'x', at: 1 }])).toHaveLength(1);
  });
});
