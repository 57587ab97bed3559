/**
 * The host thread's spill files (workers/mcp/spill.ts) and a worker's read
 * of one (spill-read.ts), run in this thread on real files: the reader
 * opens a descriptor of its own and reads nothing when the host's
 * descriptor number has been closed or reused by another file; a span
 * claimed twice is a typed error; a spill finished after shutdown is
 * closed, not registered.
 */
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { McpSpillRef } from '../../engine/protocol/mcp.js';
import { SPAN_MIN_BYTES } from '../../workers/mcp/skeleton.js';
import { claimSpan, openSpillTokens, releaseAllSpills, releaseSpill, SpillWriter } from '../../workers/mcp/spill.js';
import { writeSpilled } from '../../workers/mcp/spill-read.js';

let dir: string;

beforeEach(async () => {
  dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-spill-registry-'));
});

afterEach(async () => {
  for (const t of openSpillTokens()) await releaseSpill(t);
  await fsp.rm(dir, { recursive: true, force: true });
});

const TEXT = 'spilled text\n'.repeat(Math.ceil((SPAN_MIN_BYTES * 2) / 13));

/** A writer given a tool result whose text will be left in the spill file. */
function writer(): SpillWriter {
  const w = new SpillWriter(dir);
  const line = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: TEXT }] } });
  // In pieces, as the pipe hands them over.
  const bytes = Buffer.from(line);
  for (let at = 0; at < bytes.length; at += 50_000) w.write(bytes.subarray(at, at + 50_000));
  return w;
}

/** A tool result whose text is left in a spill file, as the transport makes one. */
async function spilled(): Promise<{ ref: McpSpillRef; token: string }> {
  const { value, token } = await writer().end();
  const text = (value as { result: { content: Array<{ text: string }> } }).result.content[0]?.text;
  const claimed = claimSpan(text);
  if (!claimed || token === undefined) throw new Error('the text was not spilled');
  return { ref: { ...claimed.ref, parts: ['> ', claimed.span], attachments: [] }, token };
}

/** A sink that keeps what it is given. */
function sink(): { out: Writable; text: () => string } {
  const chunks: string[] = [];
  const out = new Writable({
    decodeStrings: false,
    write(chunk: string, _enc, cb) {
      chunks.push(chunk);
      cb();
    },
  });
  return { out, text: () => chunks.join('') };
}

/** Descriptors of this process open on a file in `dir`. */
async function openIn(d: string): Promise<string[]> {
  const fds = await fsp.readdir('/proc/self/fd');
  const links = await Promise.all(fds.map((fd) => fsp.readlink(`/proc/self/fd/${fd}`).catch(() => '')));
  return links.filter((l) => l.startsWith(`${d}/`));
}

describe("a worker's read of a spill file", () => {
  it('reads the text exactly through a descriptor of its own, which it closes', async () => {
    const { ref } = await spilled();
    const { out, text } = sink();
    const r = await writeSpilled(ref, out, new AbortController().signal);
    expect(text()).toBe(`> ${TEXT}`);
    expect(r.bytes).toBe(Buffer.byteLength(`> ${TEXT}`));
    // Only the host's descriptor is left (the file is unlinked: its link names it deleted).
    expect(await openIn(dir)).toHaveLength(1);
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it('reads nothing when the host has closed its descriptor and the number names another file', async () => {
    const { ref, token } = await spilled();
    await releaseSpill(token);
    // The lowest free number is the one just closed: the next file opened takes it.
    const other = join(dir, 'other');
    await fsp.writeFile(other, 'not the spill file');
    const taken: fsp.FileHandle[] = [];
    try {
      for (let i = 0; i < 64 && !taken.some((f) => f.fd === ref.fd); i++) taken.push(await fsp.open(other, 'r'));
      expect(taken.map((f) => f.fd)).toContain(ref.fd);
      const { out, text } = sink();
      const err = await writeSpilled(ref, out, new AbortController().signal).catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe('EWORKERCRASH');
      expect(text()).toBe('');
    } finally {
      for (const f of taken) await f.close();
    }
    await fsp.rm(other);
    expect(await openIn(dir)).toEqual([]);
  });

  it('fails typed when the host has closed its descriptor and the number is free', async () => {
    const { ref, token } = await spilled();
    await releaseSpill(token);
    const { out, text } = sink();
    const err = await writeSpilled(ref, out, new AbortController().signal).catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('EWORKERCRASH');
    expect(text()).toBe('');
    expect(await openIn(dir)).toEqual([]);
  });
});

describe('the spill registry', () => {
  it('refuses a span claimed twice with EPROTOCOL, and the file stays until released', async () => {
    const { value, token } = await writer().end();
    const text = (value as { result: { content: Array<{ text: string }> } }).result.content[0]?.text;
    expect(claimSpan(text)).toBeDefined();
    expect(() => claimSpan(text)).toThrow(expect.objectContaining({ code: 'EPROTOCOL' }));
    expect(openSpillTokens()).toEqual([token]);
    await releaseSpill(token as string);
    await releaseSpill(token as string);
    expect(await openIn(dir)).toEqual([]);
  });

  // Last: shutdown is for good in this module instance, as in a host thread.
  it('closes a spill finished after shutdown instead of registering it, failing it ECLOSED', async () => {
    const w = writer();
    await releaseAllSpills();
    const err = await w.end().catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('ECLOSED');
    expect(openSpillTokens()).toEqual([]);
    expect(await openIn(dir)).toEqual([]);
    expect(await fsp.readdir(dir)).toEqual([]);
  });
});
