/**
 * End to end with a real engine: real bash and read calls (worker threads, a
 * child process, real files), their terminal results turned into a model
 * history, compacted with a first trial rejected for context length. The
 * retry's references read back each whole stream through Engine.read, the
 * artifact reads are omitted, the filesystem read whose path contains
 * `artifact://` is ordinary, and compaction adds nothing to the store.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ARTIFACT_READ_OMITTED,
  ContextLengthError,
  compact,
  type Engine,
  historyFromCalls,
  type TerminalResult,
  type ToolResultItem,
} from '../../engine/index.js';
import { filesUnder } from '../store/helpers.js';
import { closeEngines, engineWith, expectStoreClean, openEngine } from '../support/engines.js';
import { readUris, scripted } from './support.js';

afterEach(closeEngines);

/** SHA-256 and size of everything Engine.read returns for `uri`, page by page. */
async function readAll(engine: Engine, uri: string): Promise<{ digest: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  let next: number | null = 0;
  while (next !== null) {
    const page = await engine.read(uri, { offset: next, limit: 2000 });
    hash.update(page.content);
    bytes += Buffer.byteLength(page.content);
    next = page.nextOffset;
  }
  return { digest: hash.digest('hex'), bytes };
}

describe('compaction of a real session history', () => {
  it('retries with usable references, omitted artifact reads and ordinary filesystem reads', async () => {
    const { engine, dir } = await openEngine();
    await fsp.mkdir(join(dir, 'artifact:'));
    await fsp.writeFile(join(dir, 'artifact:', 'x'), 'a file, not an artifact\n');

    const calls: Array<{ tool: string; args: unknown; result: TerminalResult }> = [];
    const run = async (tool: string, args: Record<string, unknown>): Promise<TerminalResult> => {
      const result = await engine.run(tool, args);
      calls.push({ tool, args, result });
      return result;
    };
    const bash = await run('bash', { command: 'seq 1 3000; echo oops >&2' });
    expect(bash.output?.kind).toBe('streams');
    if (bash.output?.kind !== 'streams') return;
    const manifest = bash.output.manifest;
    const page = await run('read', { filePath: `artifact://${manifest}/stdout`, offset: 10, limit: 5 });
    const whole = await run('read', { filePath: `artifact://${manifest}` });
    const fsPath = `${dir}/artifact://x`;
    const file = await run('read', { filePath: fsPath });
    expect([page.status, whole.status, file.status]).toEqual(['success', 'success', 'success']);
    expect(file.model).toContain('a file, not an artifact');

    const history = historyFromCalls(calls);
    const before = structuredClone(history);
    const blobsBefore = await filesUnder(engine.store.root);
    const s = scripted({ throws: new ContextLengthError('provider: context too long') }, { returns: 'summary' });
    const r = await compact(history, s.summarizer, { keepRecent: 2 });
    expect(r.ok && r.attempts).toBe(2);
    expect(await filesUnder(engine.store.root)).toEqual(blobsBefore);
    expect(history).toEqual(before);
    expect(r.ok && r.history.slice(1)).toEqual(history.slice(6));

    const retry = s.inputs[1]!;
    const results = retry.items.filter((i): i is ToolResultItem => i.type === 'tool_result');
    expect(results.map((x) => x.model === ARTIFACT_READ_OMITTED)).toEqual([false, true, true, false]);
    expect(results[3]?.model).toMatch(
      /^\[Page output omitted for compaction \(\d+ bytes, \d+ lines?\); it was not stored as an artifact\]$/,
    );
    expect(retry.text).not.toContain('a file, not an artifact');
    expect(retry.text).not.toContain('\n2999\n');

    const uris = readUris(retry.text);
    expect(uris).toEqual([`artifact://${manifest}/stdout`, `artifact://${manifest}/stderr`]);
    for (const s of bash.output.streams) {
      expect(await readAll(engine, `artifact://${manifest}/${s.name}`)).toEqual({ digest: s.digest, bytes: s.bytes });
    }
    await expectStoreClean(engine);
  });

  it("a cut error's whole text reaches the summarizer as a read hint that reads it back", async () => {
    const { engine } = await engineWith(['script-single']);
    const times = 20_000;
    const failed = await engine.run('script-single', { big: { field: 'throw', char: 'E', times } });
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'ETOOLFAILED' } });
    const whole = failed.fullText?.error;
    expect(whole?.bytes).toBe(times);
    const history = historyFromCalls([{ tool: 'script-single', args: {}, result: failed }]);
    const s = scripted({ throws: new ContextLengthError('provider: context too long') }, { returns: 'summary' });
    const r = await compact(history, s.summarizer, { keepRecent: 0 });
    expect(r.ok).toBe(true);
    for (const input of s.inputs) {
      expect(input.text).toContain(`more bytes cut; the whole text: read(filePath="artifact://${whole?.digest}")]`);
      expect(readUris(input.text)).toContain(`artifact://${whole?.digest}`);
    }
    const read = await readAll(engine, `artifact://${whole?.digest}`);
    expect(read).toEqual({ digest: createHash('sha256').update('E'.repeat(times)).digest('hex'), bytes: times });
    await expectStoreClean(engine);
  });
});
