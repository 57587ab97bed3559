/**
 * The outputs the documentation shows are rendered from the code (or, where
 * the output is deterministic, produced by running the documented command)
 * and compared with the docs, so a change of banner, version, unit or
 * message cannot leave an example behind.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { continuationNote } from '../../cli/read.js';
import { serveBanner } from '../../cli/serve.js';
import { renderSessions } from '../../cli/sessions.js';
import { renderTools } from '../../cli/tools.js';
import { BUILTIN_TOOLS } from '../../engine/builtins/descriptions.js';
import { incompleteDisplay } from '../../engine/presentation/display.js';
import { PROTOCOL_VERSION } from '../../engine/protocol/messages.js';
import { formatBytes } from '../../engine/protocol/units.js';
import type { ToolInfo } from '../../engine/registry.js';
import { cleanupDirs, ROOT, sluice, tempDir } from './helpers.js';

afterEach(cleanupDirs);

const doc = (name: string) => readFileSync(join(ROOT, 'docs', name), 'utf8');

/** The lines of the fenced block of `text` that starts with the line `first` (the block's own indent removed). */
function block(text: string, first: string): string[] {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trimStart() === first);
  expect(start, `a block starting ${JSON.stringify(first)}`).toBeGreaterThan(-1);
  const indent = (lines[start] as string).length - first.length;
  const end = lines.findIndex((l, i) => i > start && l.trimStart().startsWith('```'));
  return lines.slice(start, end).map((l) => l.slice(indent));
}

describe('documented output', () => {
  it('the sluice serve banner of docs/http.md and docs/cli.md, with the real protocol version', () => {
    const http = block(doc('http.md'), '$ sluice serve --store ./.sluice').slice(1, 5);
    const rendered = serveBanner({
      url: 'http://127.0.0.1:7433',
      store: '/home/me/project/.sluice',
      token: { path: '/home/me/project/.sluice/server.token', token: '3f9c…64 hex digits…' },
    });
    expect(`${http.join('\n')}\n`).toBe(rendered);
    const web = block(doc('web.md'), '$ sluice serve --store ./.sluice').slice(1, 5);
    expect(`${web.join('\n')}\n`).toBe(rendered);
    const line = serveBanner({ url: 'http://HOST:PORT', store: 'DIR' }).trimEnd();
    const later = serveBanner({ url: 'http://HOST:PORT', store: 'DIR', tokenPath: 'DIR/server.token' }).split('\n')[1];
    expect(doc('cli.md')).toContain(`\`${later}\``);
    expect(doc('cli.md')).toContain(`\`${line}\``);
    expect(line).toContain(`(protocol ${PROTOCOL_VERSION},`);
  });

  it('the protocol version wherever the docs name it', () => {
    expect(doc('http.md')).toContain(`\`Sluice-Protocol: ${PROTOCOL_VERSION}\``);
    expect(doc('protocol.md')).toContain(`is **${PROTOCOL_VERSION}**`);
    expect(doc('protocol.md')).toContain(`"urn:sluice:protocol:${PROTOCOL_VERSION}"`);
    for (const name of ['http.md', 'cli.md', 'protocol.md']) {
      for (const m of doc(name).matchAll(/\(protocol (\d+),|Sluice-Protocol: (\d+)/g)) {
        expect(Number(m[1] ?? m[2]), `${name}: ${m[0]}`).toBe(PROTOCOL_VERSION);
      }
    }
  });

  it('the sluice run example of docs/cli.md is what the command prints', async () => {
    const lines = block(doc('cli.md'), `$ sluice run bash --args '{"command":"seq 1 5; echo oops >&2; exit 4"}'`);
    const echo = lines.indexOf('$ echo $?');
    const dir = await tempDir();
    const r = await sluice(['run', 'bash', '--args', '{"command":"seq 1 5; echo oops >&2; exit 4"}'], dir);
    expect(r.stdout).toBe(`${lines.slice(1, echo).join('\n')}\n`);
    expect(String(r.code)).toBe(lines[echo + 1]);
  });

  it('the "did you mean" examples of docs/cli.md are what the commands print', async () => {
    const lines = block(doc('cli.md'), '$ sluice run bash --sesion demo');
    const dir = await tempDir();
    for (let i = 0; i < lines.length; i += 2) {
      const command = (lines[i] as string).replace(/^\$ sluice /, '').split(' ');
      const r = await sluice(command, dir);
      expect(r.stderr, lines[i]).toBe(`${lines[i + 1]}\n`);
      expect(r.code).toBe(2);
    }
  });

  it('the read continuation note of docs/cli.md', () => {
    const lines = block(doc('cli.md'), '$ sluice read artifact://<d> --limit 1 > part1');
    expect(`${lines[1]}\n`).toBe(
      continuationNote('artifact://<d>', { nextOffset: 0, nextByteOffset: 2097152 } as never),
    );
  });

  it('the sluice tools and sluice sessions examples of docs/cli.md', () => {
    const tools = block(doc('cli.md'), '$ sluice tools');
    const listed = renderTools([{ ...BUILTIN_TOOLS.bash, source: 'builtin' } as ToolInfo])
      .trimEnd()
      .split('\n');
    expect(tools.slice(1, -1)).toEqual(listed);
    expect(tools.at(-1)).toBe('…');
    const sessions = block(doc('cli.md'), '$ sluice sessions');
    const table = renderSessions([
      {
        id: 'demo',
        calls: 3,
        reverted: 1,
        interrupted: 0,
        corruptLines: 0,
        bytes: 3277,
        referencedBytes: 588895,
        updatedAt: '2026-12-01T13:49:58.513Z',
      },
    ]);
    expect(`${sessions.slice(1).join('\n')}\n`).toBe(table);
  });

  it('sizes in the displays the docs show use the one formatter', () => {
    const cli = doc('cli.md');
    expect(cli).toContain(`exit code 0 · stdout ${formatBytes(588895)} · stderr ${formatBytes(0)} · 0.06 s`);
    const shown = block(doc('presentation.md'), 'bash was cancelled after 12.4 s: npm test');
    const rendered = incompleteDisplay({
      tool: 'bash',
      status: 'cancelled',
      durationMs: 12_400,
      streams: [
        { name: 'stdout', bytes: 48_128, lines: 912 },
        { name: 'stderr', bytes: 0, lines: 0 },
      ],
      lost: false,
      reason: 'ECANCELLED: interrupted (Ctrl-C)',
      summary: 'npm test',
    });
    expect(shown.join('\n')).toBe(rendered);
  });
});
