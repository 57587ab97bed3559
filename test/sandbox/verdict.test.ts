/** Which limit a sandboxed process's exit is put down to, and the ELIMIT it becomes. */
import { describe, expect, it } from 'vitest';
import { LimitExceededError } from '../../engine/protocol/errors.js';
import { limitExceededError, limitExceededMessage, limitVerdict } from '../../workers/sandbox/verdict.js';

const exit = (code: number | null, signal: NodeJS.Signals | null = null) => ({ code, signal });

describe('a limit verdict', () => {
  it('puts SIGXCPU and SIGXFSZ (bwrap exits 152 and 153) down to cpu and fileSize, only when those are set', () => {
    const limits = { cpuSeconds: 2, fileSizeBytes: 1 << 20 };
    expect(limitVerdict(limits, exit(152), undefined)).toEqual({ limit: 'cpu', value: 2 });
    expect(limitVerdict(limits, exit(null, 'SIGXCPU'), undefined)).toEqual({ limit: 'cpu', value: 2 });
    expect(limitVerdict(limits, exit(153), undefined)).toEqual({ limit: 'fileSize', value: 1 << 20 });
    expect(limitVerdict(limits, exit(null, 'SIGXFSZ'), undefined)).toEqual({ limit: 'fileSize', value: 1 << 20 });
    expect(limitVerdict({ memoryBytes: 1 << 30 }, exit(152), undefined)).toBeUndefined();
    expect(limitVerdict({ cpuSeconds: 2 }, exit(153), undefined)).toBeUndefined();
    expect(limitVerdict(undefined, exit(152), undefined)).toBeUndefined();
  });

  it('takes the cgroup counters first, since an OOM kill and a CPU hard limit are both SIGKILL', () => {
    const limits = { memoryBytes: 1 << 30, cpuSeconds: 2 };
    expect(limitVerdict(limits, exit(137), { limit: 'memory', value: 1 << 30 })).toEqual({
      limit: 'memory',
      value: 1 << 30,
    });
    expect(limitVerdict(limits, exit(137), undefined)).toBeUndefined();
  });

  it('takes a moved cgroup counter as the verdict even after a clean exit', () => {
    expect(limitVerdict({ processes: 8 }, exit(0), { limit: 'processes', value: 8 })).toEqual({
      limit: 'processes',
      value: 8,
    });
    expect(limitVerdict({ fileSizeBytes: 8 }, exit(0), undefined)).toBeUndefined();
  });

  it('becomes ELIMIT with { limit, value } and the limit in words', () => {
    expect(limitExceededMessage({ limit: 'memory', value: 256 << 20 })).toBe('limit memory (256.0 MiB) exceeded');
    expect(limitExceededMessage({ limit: 'cpu', value: 1 })).toBe('limit cpu (1 CPU second) exceeded');
    expect(limitExceededMessage({ limit: 'cpu', value: 30 })).toBe('limit cpu (30 CPU seconds) exceeded');
    expect(limitExceededMessage({ limit: 'processes', value: 64 })).toBe('limit processes (64) exceeded');
    expect(limitExceededMessage({ limit: 'fileSize', value: 100 << 20 })).toBe('limit fileSize (100.0 MiB) exceeded');
    const err = limitExceededError({ limit: 'openFiles', value: 256 });
    expect(err).toBeInstanceOf(LimitExceededError);
    expect(err).toMatchObject({ code: 'ELIMIT', details: { limit: 'openFiles', value: 256 } });
  });
});
