import { describe, expect, it } from 'vitest';
import { formatBytes, formatDuration, incompleteDisplay } from '../../engine/presentation/display.js';

describe('incomplete display', () => {
  it('says what ran, how long, what was captured and why a failed call ended', () => {
    expect(
      incompleteDisplay({
        tool: 'bash',
        summary: 'make test',
        status: 'failed',
        durationMs: 1234,
        streams: [
          { name: 'stdout', bytes: 1234, lines: 12 },
          { name: 'stderr', bytes: 0, lines: 0 },
        ],
        reason: 'exit status 2',
      }),
    ).toBe(
      'bash failed after 1.2 s: make test\nReason: exit status 2\nCaptured (incomplete): stdout 1.2 KiB in 12 lines, stderr empty',
    );
  });

  it('describes a cancelled call with single output', () => {
    expect(
      incompleteDisplay({
        tool: 'fetch',
        status: 'cancelled',
        durationMs: 83_000,
        streams: [{ name: '', bytes: 1, lines: 1 }],
        reason: 'cancelled by the user',
      }),
    ).toBe(
      'fetch was cancelled after 1 min 23 s\nReason: cancelled by the user\nCaptured (incomplete): output 1 B in 1 line',
    );
  });

  it('says nothing was captured when every stream is empty', () => {
    expect(
      incompleteDisplay({
        tool: 'bash',
        summary: 'sleep 100',
        status: 'cancelled',
        durationMs: 450,
        streams: [
          { name: 'stdout', bytes: 0, lines: 0 },
          { name: 'stderr', bytes: 0, lines: 0 },
        ],
        reason: '',
      }),
    ).toBe('bash was cancelled after 450 ms: sleep 100\nReason: no reason given\nCaptured: nothing');
  });

  it('keeps the summary on one line and indents a multi-line reason', () => {
    expect(
      incompleteDisplay({
        tool: 'bash',
        summary: 'cd src\nmake',
        status: 'failed',
        durationMs: 2_000,
        streams: [{ name: 'stdout', bytes: 3 * 1024 * 1024, lines: 40_000 }],
        reason: 'worker crashed\nout of memory',
      }),
    ).toBe(
      'bash failed after 2.0 s: cd src ↵ make\nReason: worker crashed\n  out of memory\nCaptured (incomplete): stdout 3.0 MiB in 40000 lines',
    );
  });

  it('clips a very long summary', () => {
    const text = incompleteDisplay({
      tool: 't',
      summary: 'x'.repeat(1000),
      status: 'failed',
      durationMs: 1,
      streams: [],
      reason: 'r',
    });
    expect(text.split('\n')[0]).toBe(`t failed after 1 ms: ${'x'.repeat(200)}…`);
  });
});

describe('human units', () => {
  it('formats durations', () => {
    expect([0, 999, 1000, 59_999, 60_000, 3_599_000, 3_600_000, 7_380_000, -1].map(formatDuration)).toEqual([
      '0 ms',
      '999 ms',
      '1.0 s',
      '59.9 s',
      '1 min 0 s',
      '59 min 59 s',
      '1 h 0 min',
      '2 h 3 min',
      'an unknown time',
    ]);
  });

  it('formats sizes', () => {
    expect([0, 1, 1023, 1024, 1536, 100 * 1024 * 1024, 2 ** 31].map(formatBytes)).toEqual([
      '0 B',
      '1 B',
      '1023 B',
      '1.0 KiB',
      '1.5 KiB',
      '100.0 MiB',
      '2.0 GiB',
    ]);
  });

  it('says nothing was kept when the output was lost to a disk error, whatever had been captured', () => {
    expect(
      incompleteDisplay({
        tool: 'bash',
        status: 'failed',
        durationMs: 900,
        streams: [],
        lost: true,
        reason: 'EDISK: ENOSPC: no space left on device, write',
      }),
    ).toBe(
      'bash failed after 900 ms\nReason: EDISK: ENOSPC: no space left on device, write\nKept: nothing (the output could not be stored)',
    );
  });
});
