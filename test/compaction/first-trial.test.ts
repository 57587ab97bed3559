/**
 * Rule 1: the first summarizer trial holds the entire active history (prior
 * summary, everything since, and the recent items kept afterwards) and never
 * anything before the prior summary. On success the new context is the
 * summary followed by the caller's own recent items.
 */
import { describe, expect, it } from 'vitest';
import { compact, type HistoryItem } from '../../engine/index.js';
import { assistant, call, pageRef, result, scripted, sha, streamsRef, summary, user } from './support.js';

const D = sha('bash run');

function history(): HistoryItem[] {
  return [
    user('discarded: before the prior summary'),
    call('c0', 'bash', { command: 'echo discarded' }),
    result('c0', { model: 'discarded output\n' }),
    summary('S1: earlier work'),
    user('fix the build'),
    assistant('running the tests'),
    call('c1', 'bash', { command: 'npm test' }),
    result('c1', {
      status: 'failed',
      model: '[stdout]\nFAIL a.test\n\n[stderr]\n(empty)\n[Status: failed. exit code 1.]\n',
      output: streamsRef([
        ['stdout', 'FAIL a.test\n'],
        ['stderr', ''],
      ]),
      metadata: { exitCode: 1 },
    }),
    user('now read the log'),
    call('c2', 'read', { filePath: `artifact://${D}/stdout` }),
    result('c2', { model: 'FAIL a.test\n', output: pageRef('FAIL a.test\n'), metadata: { offset: 0 } }),
    assistant('test a fails'),
  ];
}

const FULL_TEXT = `[prior summary]
S1: earlier work

[user]
fix the build

[assistant]
running the tests

[tool call c1: bash]
{"command":"npm test"}

[tool result c1: failed]
[stdout]
FAIL a.test

[stderr]
(empty)
[Status: failed. exit code 1.]
[metadata] {"exitCode":1}

[user]
now read the log

[tool call c2: read]
{"filePath":"artifact://${D}/stdout"}

[tool result c2: success]
FAIL a.test
[metadata] {"offset":0}

[assistant]
test a fails
`;

describe('first trial', () => {
  it('sends the prior summary, everything since and the recent items that will be kept, unpruned', async () => {
    const h = history();
    const s = scripted({ returns: 'S2' });
    const r = await compact(h, s.summarizer, { keepRecent: 3 });
    expect(s.inputs).toHaveLength(1);
    const input = s.inputs[0]!;
    expect(input.attempt).toBe(1);
    expect(input.pruned).toBe(false);
    expect(input.text).toBe(FULL_TEXT);
    expect(input.items).toEqual(h.slice(3));
    // The kept items are the last three: the read call, its result, the last assistant message.
    expect(input.recentStart).toBe(6);
    expect(input.items[input.recentStart]).toEqual(h[9]);
    expect(input.trigger).toBe('manual');
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.attempts).toBe(1);
    expect(r.pruned).toBe(false);
    expect(r.summary).toBe('S2');
    expect(r.history).toEqual([{ type: 'summary', content: 'S2' }, h[9], h[10], h[11]]);
    expect(r.history[0]).toBe(r.summaryItem);
    expect(r.kept).toBe(3);
  });

  it('returns the very same recent item objects, unchanged', async () => {
    const h = history();
    const before = structuredClone(h);
    const r = await compact(h, scripted({ returns: 'S2' }).summarizer, { keepRecent: 3 });
    if (!r.ok) throw new Error('compaction failed');
    expect(r.history[1]).toBe(h[9]);
    expect(r.history[2]).toBe(h[10]);
    expect(r.history[3]).toBe(h[11]);
    expect(h).toEqual(before);
  });

  it('never sends anything from before the prior summary (discarded logs)', async () => {
    const s = scripted({ returns: 'S2' });
    await compact(history(), s.summarizer, { keepRecent: 0 });
    const { text, items } = s.inputs[0]!;
    expect(text).not.toContain('discarded');
    expect(text.startsWith('[prior summary]\nS1: earlier work\n')).toBe(true);
    expect(items.some((i) => i.type === 'tool_call' && i.callId === 'c0')).toBe(false);
  });

  it('starts at the last summary when the history holds several', async () => {
    const s = scripted({ returns: 'S3' });
    const h = [summary('S1'), user('old'), summary('S2'), user('new')];
    const r = await compact(h, s.summarizer, { keepRecent: 0 });
    expect(s.inputs[0]?.text).toBe('[prior summary]\nS2\n\n[user]\nnew\n');
    expect(r.ok && r.history).toEqual([{ type: 'summary', content: 'S3' }]);
  });

  it('summarizes a history with no prior summary from its first item', async () => {
    const s = scripted({ returns: 'S1' });
    const h = [user('a'), assistant('b'), user('c')];
    const r = await compact(h, s.summarizer, { keepRecent: 1 });
    expect(s.inputs[0]?.text).toBe('[user]\na\n\n[assistant]\nb\n\n[user]\nc\n');
    expect(s.inputs[0]?.recentStart).toBe(2);
    expect(r.ok && r.history[1]).toBe(h[2]);
  });

  it('extends the recent suffix backwards so a kept result keeps its call', async () => {
    const h = [user('u'), call('c1', 'bash', { command: 'ls' }), user('interleaved'), result('c1', { model: 'x\n' })];
    const s = scripted({ returns: 'S' });
    const r = await compact(h, s.summarizer, { keepRecent: 1 });
    if (!r.ok) throw new Error('compaction failed');
    expect(r.kept).toBe(3);
    expect(r.history.slice(1)).toEqual(h.slice(1));
    expect(r.history[1]).toBe(h[1]);
    expect(s.inputs[0]?.recentStart).toBe(1);
  });

  it('never keeps the prior summary in the suffix, however large keepRecent is', async () => {
    const h = [summary('S1'), user('a'), assistant('b')];
    const s = scripted({ returns: 'S2' });
    const r = await compact(h, s.summarizer, { keepRecent: 100 });
    if (!r.ok) throw new Error('compaction failed');
    expect(r.history).toEqual([{ type: 'summary', content: 'S2' }, h[1], h[2]]);
    expect(s.inputs[0]?.recentStart).toBe(1);
    expect(s.inputs[0]?.text).toBe('[prior summary]\nS1\n\n[user]\na\n\n[assistant]\nb\n');
  });

  it('gives the summarizer a private copy: changing its items changes nothing for the caller', async () => {
    const h = history();
    const before = structuredClone(h);
    const s = scripted({
      run: (input) => {
        for (const item of input.items) {
          if (item.type === 'tool_call' && typeof item.args === 'object') item.args.command = 'rm -rf /';
          if (item.type === 'tool_result') {
            item.metadata.touched = true;
            item.model = 'changed';
            if (item.output?.kind === 'streams') item.output.streams.length = 0;
          }
          if (item.type === 'user') item.content = 'changed';
        }
        return 'S2';
      },
    });
    const r = await compact(h, s.summarizer, { keepRecent: 3 });
    expect(h).toEqual(before);
    expect(r.ok && r.history.slice(1)).toEqual(before.slice(9));
  });

  it('builds the result from the history as it was when compaction started', async () => {
    const h = history();
    const s = scripted({
      run: () => {
        h.push(user('appended while summarizing'));
        return 'S2';
      },
    });
    const r = await compact(h, s.summarizer, { keepRecent: 3 });
    if (!r.ok) throw new Error('compaction failed');
    expect(r.history).toEqual([{ type: 'summary', content: 'S2' }, h[9], h[10], h[11]]);
    expect(h).toHaveLength(13);
  });

  it('passes the trigger and the signal through without changing the first trial', async () => {
    const controller = new AbortController();
    const s = scripted({ returns: 'S2' });
    await compact(history(), s.summarizer, { keepRecent: 3, trigger: 'overflow', signal: controller.signal });
    expect(s.inputs[0]?.trigger).toBe('overflow');
    expect(s.inputs[0]?.signal).toBe(controller.signal);
    expect(s.inputs[0]?.pruned).toBe(false);
    expect(s.inputs[0]?.text).toBe(FULL_TEXT);
  });
});
