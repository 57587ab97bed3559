/**
 * Properties of the retry over random histories: the caller's history is
 * never changed and its recent items come back as the same objects; the
 * snapshot pairs every call with its result in place; no result's output
 * text survives pruning; artifact reads keep nothing but the marker; every
 * other stored output is addressed by exactly its public read URIs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ARTIFACT_READ_OMITTED,
  ContextLengthError,
  compact,
  type HistoryItem,
  type OutputRef,
  type ToolResultItem,
} from '../../engine/index.js';
import { readUris, scripted } from './support.js';

const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
const streamName = fc.constantFrom('stdout', 'stderr', 'results', 'diag.log');
const count = fc.nat({ max: 1_000_000 });

const outputRef: fc.Arbitrary<OutputRef | null> = fc.oneof(
  fc.constant(null),
  fc.record({ kind: fc.constant('single' as const), digest: hex, bytes: count, lines: count, truncated: fc.boolean() }),
  fc.record({
    kind: fc.constant('streams' as const),
    manifest: hex,
    streams: fc
      .uniqueArray(streamName, { minLength: 1, maxLength: 4 })
      .chain((names) =>
        fc.tuple(
          ...names.map((name) =>
            fc.record({ name: fc.constant(name), digest: hex, bytes: count, lines: count, truncated: fc.boolean() }),
          ),
        ),
      ),
  }),
  fc.record({ kind: fc.constant('page' as const), bytes: count, lines: count }),
);

const filePath = fc.oneof(
  hex.map((d) => `artifact://${d}`),
  fc.tuple(hex, streamName).map(([d, s]) => `artifact://${d}/${s}`),
  hex.map((d) => `ARTIFACT://${d}`),
  fc.constantFrom('/tmp/artifact://x', 'notes-artifact://.txt', 'src/main.ts', ' artifact://x', 'artifact:bad'),
);

type CallSpec = { tool: string; filePath: string; asString: boolean; output: OutputRef | null; extras: boolean };
const callSpec: fc.Arbitrary<CallSpec> = fc.record({
  tool: fc.constantFrom('read', 'read', 'bash', 'grep', 'find_text'),
  filePath,
  asString: fc.boolean(),
  output: outputRef,
  extras: fc.boolean(),
});
const turn = fc.oneof(
  fc.constant({ kind: 'user' as const }),
  fc.constant({ kind: 'assistant' as const }),
  callSpec.map((c) => ({ kind: 'call' as const, ...c })),
);

/** Builds a history whose every result text carries a unique token, to look for in the retry text. */
function build(turns: Array<{ kind: 'user' | 'assistant' } | ({ kind: 'call' } & CallSpec)>, withSummary: boolean) {
  const h: HistoryItem[] = withSummary ? [{ type: 'summary', content: 'prior summary' }] : [];
  const artifactReads = new Set<string>();
  turns.forEach((t, i) => {
    if (t.kind !== 'call') {
      h.push({ type: t.kind, content: `${t.kind} message ${i}` });
      return;
    }
    const callId = `call_${i}`;
    const args = { filePath: t.filePath, offset: i };
    h.push({ type: 'tool_call', callId, tool: t.tool, args: t.asString ? JSON.stringify(args) : args });
    if ((t.tool === 'read' || t.tool === 'grep') && /^artifact:/i.test(t.filePath)) artifactReads.add(callId);
    h.push({
      type: 'tool_result',
      callId,
      status: 'success',
      complete: true,
      model: `TOKEN-${i}-model\nmore output\n`,
      output: t.output,
      metadata: t.extras ? { note: `TOKEN-${i}-meta` } : {},
      attachments: t.extras ? [{ mediaType: 'text/plain', data: `TOKEN-${i}-data` }] : [],
      messages: t.extras ? [{ role: 'system', content: `TOKEN-${i}-message` }] : [],
    });
  });
  return { h, artifactReads };
}

function expectedUris(output: OutputRef | null): string[] {
  if (output?.kind === 'single') return [`artifact://${output.digest}`];
  if (output?.kind === 'streams') return output.streams.map((s) => `artifact://${output.manifest}/${s.name}`);
  return [];
}

describe('the pruned retry over random histories', () => {
  it('keeps the caller history, pairs every call, and carries no result output text', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(turn, { maxLength: 25 }),
        fc.boolean(),
        fc.nat({ max: 30 }),
        async (turns, withSummary, keepRecent) => {
          const { h, artifactReads } = build(turns, withSummary);
          const before = structuredClone(h);
          const s = scripted({ throws: new ContextLengthError('too long') }, { returns: 'S' });
          const r = await compact(h, s.summarizer, { keepRecent });
          expect(h).toEqual(before);
          if (!r.ok) throw new Error(`failed: ${r.reason}`);
          r.history.slice(1).forEach((item, i) => {
            expect(item).toBe(h[h.length - r.kept + i]);
          });
          expect(r.kept).toBeGreaterThanOrEqual(Math.min(keepRecent, h.length - (withSummary ? 1 : 0)));

          const retry = s.inputs[1]!;
          expect(retry.items.map((i) => [i.type, 'callId' in i ? i.callId : null])).toEqual(
            h.map((i) => [i.type, 'callId' in i ? i.callId : null]),
          );
          expect(retry.text).not.toMatch(/TOKEN-\d+-model/);
          h.forEach((item, i) => {
            if (item.type !== 'tool_result') return;
            const snap = retry.items[i] as ToolResultItem;
            if (artifactReads.has(item.callId)) {
              expect(snap).toEqual({
                ...snap,
                model: ARTIFACT_READ_OMITTED,
                output: null,
                metadata: {},
                attachments: [],
                messages: [],
              });
              expect(snap.error).toBeUndefined();
              expect(retry.text).not.toContain(`TOKEN-${item.callId.slice(5)}-`);
            } else {
              expect(snap.output).toEqual(item.output);
              expect(readUris(snap.model)).toEqual(expectedUris(item.output));
              expect(snap.metadata).toEqual(item.metadata);
            }
          });
        },
      ),
      { numRuns: 150 },
    );
  });
});
