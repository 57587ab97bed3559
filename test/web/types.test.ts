/**
 * The page's own copy of the API shapes (web/types.ts: the page is a
 * separate browser bundle and imports nothing of the engine) agrees with the
 * wire schemas it mirrors: the checks below fail to compile when one drifts,
 * and the sample summaries parse with the schemas.
 */
import { describe, expect, it } from 'vitest';
import type { sandboxPolicySchema } from '../../engine/protocol/sandbox.js';
import type { z } from '../../engine/protocol/zod.js';
import {
  callSummarySchema,
  type readPageSchema,
  type searchResultSchema,
  type sessionSummarySchema,
  type statsResponseSchema,
} from '../../engine/wire/schemas.js';
import type { CallSummary, ReadPage, SandboxPolicy, SearchResult, SessionSummary, Stats } from '../../web/types.js';

/** True when A and B are mutually assignable. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** True when every A is a B (the page reads a part of the shape). */
type Fits<A, B> = [A] extends [B] ? true : false;

const checks: {
  callSummary: Same<CallSummary, z.output<typeof callSummarySchema>>;
  readPage: Fits<z.output<typeof readPageSchema>, ReadPage>;
  sandboxPolicy: Same<SandboxPolicy, z.output<typeof sandboxPolicySchema>>;
  searchResult: Fits<z.output<typeof searchResultSchema>, SearchResult>;
  sessionSummary: Same<SessionSummary, z.output<typeof sessionSummarySchema>>;
  stats: Same<Stats, z.output<typeof statsResponseSchema>>;
} = { callSummary: true, readPage: true, sandboxPolicy: true, searchResult: true, sessionSummary: true, stats: true };

describe("the web view's shapes", () => {
  it('mirror the wire schemas (a compile-time check) and a summary the page builds on parses', () => {
    expect(Object.values(checks)).toEqual([true, true, true, true, true, true]);
    const sample: CallSummary = {
      callId: 'c1',
      tool: 'bash',
      status: 'running',
      complete: null,
      startedAt: '2026-01-01T00:00:00.000Z',
      durationMs: null,
      streams: [{ name: 'stdout', bytes: 3, lines: 1 }],
      version: 1,
    };
    expect(callSummarySchema.parse(sample)).toEqual(sample);
  });
});
