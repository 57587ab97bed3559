/**
 * How an MCP tool result becomes a sluice completion (workers/mcp/result.ts):
 * every content type, in order, without a server; and where the client lives.
 */
import { promises as fsp } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { toOutcome } from '../../workers/mcp/result.js';

describe('MCP result mapping', () => {
  it('text items join with newlines in order; images and audio become attachments', () => {
    const o = toOutcome({
      content: [
        { type: 'text', text: 'first' },
        { type: 'image', data: 'aW1n', mimeType: 'image/png' },
        { type: 'text', text: 'second\n' },
        { type: 'audio', data: 'YXVk', mimeType: 'audio/wav' },
      ],
    });
    expect(o).toEqual({
      text: 'first\nsecond\n',
      attachments: [
        { mediaType: 'image/png', data: 'aW1n' },
        { mediaType: 'audio/wav', data: 'YXVk' },
      ],
      isError: false,
    });
  });

  it('embedded text resources are output, binary ones attachments named by URI, links one line each', () => {
    const o = toOutcome({
      content: [
        { type: 'resource', resource: { uri: 'file:///a.txt', mimeType: 'text/plain', text: 'alpha' } },
        { type: 'resource', resource: { uri: 'file:///b.bin', blob: 'AAE=' } },
        { type: 'resource_link', uri: 'file:///c.md', name: 'notes' },
      ],
    });
    expect(o.text).toBe('alpha\n[resource: notes file:///c.md]');
    expect(o.attachments).toEqual([{ mediaType: 'application/octet-stream', data: 'AAE=', name: 'file:///b.bin' }]);
  });

  it('structured content is the output only when there is no text; isError is kept', () => {
    expect(toOutcome({ content: [], structuredContent: { n: 1 } }).text).toBe('{\n  "n": 1\n}');
    expect(toOutcome({ content: [{ type: 'text', text: 'n=1' }], structuredContent: { n: 1 } }).text).toBe('n=1');
    expect(toOutcome({ content: [{ type: 'text', text: 'bad' }], isError: true }).isError).toBe(true);
    expect(toOutcome({ content: [] })).toEqual({ text: '', attachments: [], isError: false });
  });
});

describe('the MCP client stays off the main thread', () => {
  it('only workers/mcp/ imports the MCP SDK, and server/mcp/ its server side, loaded on demand', async () => {
    const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
    const offenders: string[] = [];
    const eager: string[] = [];
    for (const dir of ['engine', 'cli', 'server', 'compaction', 'workers']) {
      const files = (await fsp.readdir(join(root, dir), { recursive: true })).map(String);
      for (const f of files.filter((n) => n.endsWith('.ts'))) {
        const text = await fsp.readFile(join(root, dir, f), 'utf8');
        const imports = /from '@modelcontextprotocol\/sdk/.test(text);
        const client = /from '@modelcontextprotocol\/sdk\/client/.test(text);
        // The MCP server (sluice mcp, /mcp) is a front end: it runs where requests arrive, never the client.
        const serverSide = dir === 'server' && f.startsWith('mcp/') && !client;
        if (imports && !(dir === 'workers' && f.startsWith('mcp/')) && !serverSide) offenders.push(`${dir}/${f}`);
        // Outside server/mcp/, it is reached only by import(): a command or request that never uses MCP never loads it.
        if (!(dir === 'server' && f.startsWith('mcp/')) && /^import [^t][^;]*from '[./]*(server\/)?mcp\//m.test(text)) {
          eager.push(`${dir}/${f}`);
        }
      }
    }
    expect(offenders).toEqual([]);
    expect(eager).toEqual([]);
  });
});
