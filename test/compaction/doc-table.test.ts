/**
 * docs/compaction.md's table of which calls are artifact reads is what
 * `isArtifactRead` answers: every row's calls are parsed from the table and
 * asked, so the reference cannot say one thing while the code does another.
 */
import { promises as fsp } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isArtifactRead, type ToolCallItem } from '../../engine/index.js';

const DOC = new URL('../../docs/compaction.md', import.meta.url);

/** `tool {json}` or `tool '<json text>'` (string arguments) as the table writes a call. */
function parseCall(text: string): Pick<ToolCallItem, 'tool' | 'args'> {
  const space = text.indexOf(' ');
  const tool = text.slice(0, space);
  const rest = text.slice(space + 1);
  return { tool, args: rest.startsWith("'") ? rest.slice(1, -1) : JSON.parse(rest) };
}

async function tableRows(): Promise<Array<{ call: string; yes: boolean }>> {
  const doc = await fsp.readFile(DOC, 'utf8');
  const section = doc.slice(doc.indexOf('### Which calls are artifact reads'));
  const rows: Array<{ call: string; yes: boolean }> = [];
  for (const line of section.split('\n')) {
    const cells = /^\| (.+?) +\| (yes|no)[^|]*\|$/.exec(line);
    if (!cells) continue;
    for (const m of (cells[1] as string).matchAll(/`([^`]+)`/g))
      rows.push({ call: m[1] as string, yes: cells[2] === 'yes' });
  }
  return rows;
}

describe('the artifact-read table in docs/compaction.md', () => {
  it('says of each call what isArtifactRead says, grep on an artifact included', async () => {
    const rows = await tableRows();
    expect(rows.length).toBeGreaterThanOrEqual(10);
    expect(rows.some((r) => r.call.startsWith('grep ') && r.yes)).toBe(true);
    for (const r of rows) expect([r.call, isArtifactRead(parseCall(r.call))]).toEqual([r.call, r.yes]);
  });
});
