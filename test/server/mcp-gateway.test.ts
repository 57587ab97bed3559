/**
 * `sluice mcp` as a gateway in front of real MCP servers from npm
 * (`@modelcontextprotocol/server-everything`, `server-filesystem`) and a
 * fixture that returns 50 MB of text, driven by the SDK's Client: upstream
 * tools under their server's name, results bounded with read hints that
 * reach every byte, images passed through, and the gateway's memory bounded.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_MAX_MODEL_BYTES } from '../../engine/presentation/options.js';
import { bigDigest, MCP_SERVER, uniqueMarker, waitNoProcess } from '../support/mcp.js';
import {
  connectStdio,
  memoryOf,
  ROOT,
  readHint,
  removeDirs,
  type StdioSession,
  tempDir,
  textOf,
} from '../support/mcp-client.js';

const MODULES = join(ROOT, 'node_modules', '@modelcontextprotocol');
const EVERYTHING = join(MODULES, 'server-everything', 'dist', 'index.js');
const FILESYSTEM = join(MODULES, 'server-filesystem', 'dist', 'index.js');
const MB = 1_000_000;

let s: StdioSession;
let files: string;
const marker = uniqueMarker();

beforeAll(async () => {
  const dir = await tempDir();
  files = join(dir, 'files');
  await fsp.mkdir(files);
  await fsp.writeFile(join(files, 'lines.txt'), Array.from({ length: 200_000 }, (_, i) => `line ${i + 1}\n`).join(''));
  const node = process.execPath;
  s = await connectStdio(dir, [
    '--mcp',
    `every=${node} ${EVERYTHING} stdio`,
    '--mcp',
    `fs=${node} ${FILESYSTEM} ${files}`,
    '--mcp',
    `fx=${node} ${MCP_SERVER} ${marker}`,
  ]);
});

afterAll(async () => {
  await s.close();
  // The upstream servers went with the gateway.
  expect(await waitNoProcess(marker, 10_000)).toEqual([]);
  await removeDirs();
});

describe('sluice mcp as a gateway', () => {
  it('lists the upstream tools under their server names beside its own', async () => {
    const names = (await s.client.listTools()).tools.map((t) => t.name);
    expect(names.slice(0, 3)).toEqual(['bash', 'read', 'grep']);
    for (const n of ['every.echo', 'every.get-tiny-image', 'fs.read_text_file', 'fs.list_directory', 'fx.big']) {
      expect(names).toContain(n);
    }
  });

  it("passes server-everything's text and images through, and refuses arguments its schema refuses", async () => {
    const echo = await s.client.callTool({ name: 'every.echo', arguments: { message: 'through the gateway' } });
    expect(textOf(echo)).toContain('through the gateway');
    expect(echo.structuredContent).toMatchObject({ status: 'success', tool: 'every.echo' });
    const image = await s.client.callTool({ name: 'every.get-tiny-image', arguments: {} });
    const png = (image.content as Array<{ type: string; mimeType?: string; data?: string }>).find(
      (c) => c.type === 'image',
    );
    expect(png?.mimeType).toBe('image/png');
    expect(
      Buffer.from(png?.data ?? '', 'base64')
        .subarray(1, 4)
        .toString('latin1'),
    ).toBe('PNG');
    const bad = await s.client.callTool({ name: 'every.get-sum', arguments: { a: 'one' } }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(McpError);
    expect((bad as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((bad as McpError).data).toMatchObject({ code: 'EBADARGS' });
  });

  it("bounds server-filesystem's whole-file read, and the hint reads on at the right line", async () => {
    const r = await s.client.callTool({ name: 'fs.read_text_file', arguments: { path: join(files, 'lines.txt') } });
    const text = textOf(r);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(DEFAULT_MAX_MODEL_BYTES);
    expect(text.startsWith('line 1\nline 2\n')).toBe(true);
    const hint = readHint(text);
    const page = await s.client.callTool({ name: 'read', arguments: hint });
    expect(textOf(page).split('\n')[0]).toBe(`line ${hint.offset + 1}`);
  });

  it('bounds a 50 MB upstream text, reads all of it back through read, and grows the gateway under 64 MiB', async () => {
    const before = memoryOf(s.pid);
    const r = await s.client.callTool({ name: 'fx.big', arguments: { bytes: 50 * MB } });
    const after = memoryOf(s.pid);
    const text = textOf(r);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(DEFAULT_MAX_MODEL_BYTES);
    expect(r.structuredContent).toMatchObject({ status: 'success', output: { kind: 'single', bytes: 50 * MB } });
    const { filePath } = readHint(text);
    const hash = createHash('sha256');
    let offset: number | null = 0;
    let bytes = 0;
    while (offset !== null) {
      const page = await s.client.callTool({ name: 'read', arguments: { filePath, offset } });
      const sc = page.structuredContent as { output: { bytes: number }; metadata: { nextOffset: number | null } };
      const content = Buffer.from(textOf(page)).subarray(0, sc.output.bytes);
      hash.update(content);
      bytes += content.length;
      offset = sc.metadata.nextOffset;
    }
    expect(bytes).toBe(50 * MB);
    expect(hash.digest('hex')).toBe(bigDigest(50 * MB));
    // The text was never whole in the gateway: spilled to a file as it arrived, streamed into the capture.
    expect(after.peak - before.rss, `peak ${after.peak} MiB, from ${before.rss} MiB`).toBeLessThan(64);
    // Its spill file is gone: no descriptor of the gateway still holds it.
    const fds = await fsp.readdir(`/proc/${s.pid}/fd`);
    const links = await Promise.all(fds.map((fd) => fsp.readlink(`/proc/${s.pid}/fd/${fd}`).catch(() => '')));
    expect(links.filter((l) => l.endsWith('.mcp-spill (deleted)'))).toEqual([]);
  });
});
