/**
 * Reads past the end say so: the model view gets a note instead of an empty
 * page, `sluice read` says it on stderr (stdout stays empty, exit 0), and
 * Engine.read / `--json` keep `content: ""` with the totals.
 */
import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { pastEndNote, renderPageView } from '../../engine/presentation/page-view.js';
import { CLI, expectNoLeaks, openFixture, sluice } from '../support/read-fixture.js';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});

describe('a read past the end', () => {
  it('renders the page note with the offset asked for and the total', () => {
    const m = { offset: 200000, totalLines: 100000, lines: 0, nextOffset: null, filePath: 'artifact://x' };
    expect(renderPageView('', m)).toBe('[offset 200000 is past the end: 100000 lines]\n');
    expect(pastEndNote({ ...m, offset: 100000 })).toBe('[offset 100000 is past the end: 100000 lines]');
    expect(pastEndNote({ ...m, offset: 5, totalLines: 1 })).toBe('[offset 5 is past the end: 1 line]');
    expect(pastEndNote({ ...m, kind: 'directory', offset: 9, totalLines: 3 })).toBe(
      '[offset 9 is past the end: 3 entries]',
    );
    // Inside the stream, or an empty stream read from its start: no note.
    expect(pastEndNote({ ...m, offset: 99999 })).toBeUndefined();
    expect(pastEndNote({ ...m, offset: 0, totalLines: 0 })).toBeUndefined();
  });

  it('tells the model, keeps content "" with totals for Engine.read and --json, and says it on the CLI stderr', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    const r = await engine.run('bash', { command: 'seq 1 100000' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;

    const model = await engine.run('read', { filePath: uri, offset: 200000 });
    expect(model.status).toBe('success');
    expect(model.model).toBe('[offset 200000 is past the end: 100000 lines]\n');
    expect(model.output).toEqual({ kind: 'page', bytes: 0, lines: 0 });

    const page = await engine.read(uri, { offset: 200000 });
    expect(page).toMatchObject({ content: '', offset: 200000, lines: 0, totalLines: 100000, nextOffset: null });

    const text = await sluice(['read', uri, '--offset', '200000', '--store', storeDir], { cwd });
    expect({ code: text.code, stdout: text.stdout.toString('utf8') }).toEqual({ code: 0, stdout: '' });
    expect(text.stderr).toBe(`sluice read: offset 200000 is past the end: 100000 lines (${uri})\n`);

    const json = await sluice(['read', uri, '--offset', '200000', '--json', '--store', storeDir], { cwd });
    expect({ code: json.code, stderr: json.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(json.stdout.toString('utf8'))).toMatchObject({
      content: '',
      totalLines: 100000,
      nextOffset: null,
    });

    // The last line itself is not past the end: it reads, and nothing is noted.
    const last = await sluice(['read', uri, '--offset', '99999', '--store', storeDir], { cwd });
    expect({ stdout: last.stdout.toString('utf8'), stderr: last.stderr }).toEqual({ stdout: '100000\n', stderr: '' });
    await expectNoLeaks(storeDir);
  });
});
