/**
 * Support of the stalled-subscriber tests: a `sluice serve` child with its
 * API, digests of repeated patterns computed in bounded memory, and the
 * check that every gap in a stream's ids is announced by a `lagged` event.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { expect } from 'vitest';
import { subscriptionEventSchema, type terminalResultSchema } from '../../engine/wire/schemas.js';
import { cleanup, printedToken, type ServeChild, type SseEvent, spawnServe, tempDir } from './helpers.js';

/** A terminal result as the API returns it. */
export type Result = ReturnType<typeof terminalResultSchema.parse>;

export const MiB = 1024 * 1024;
/** Bytes the big calls produce. */
export const BIG = 256 * MiB;
/** How much more the server may hold at its peak than before the big calls (it streams 256 MiB). */
export const MAX_GROWTH = 128 * MiB;
/** How much higher one run's peak may be with a stalled subscriber than without (the flood displays 64 MiB). */
export const MAX_STALL_GROWTH = 32 * MiB;

const children: ServeChild[] = [];

/** Kills leftover children and removes directories (use in afterEach). */
export async function stopChildren(): Promise<void> {
  for (const c of children.splice(0)) {
    if (c.child.exitCode === null) c.child.kill('SIGKILL');
    await c.exited;
  }
  await cleanup();
}

/** A `sluice serve` child on a fresh store, with an authenticated API. */
export async function serve(args: string[]) {
  const dir = await tempDir();
  const child = await spawnServe(['--store', join(dir, 'store'), ...args]);
  children.push(child);
  const token = printedToken(child.stdout()) as string;
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${child.url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...(init.headers ?? {}) } });
  const start = async (tool: string, args: unknown): Promise<string> => {
    const res = await api('/v1/calls', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tool, args }),
    });
    expect(res.status).toBe(202);
    return ((await res.json()) as { callId: string }).callId;
  };
  const result = async (id: string): Promise<Result> => {
    for (;;) {
      const res = await api(`/v1/calls/${id}?wait=60`);
      if (res.status === 200) return (await res.json()) as Result;
      expect(res.status).toBe(202);
    }
  };
  return { child, token, api, start, result, pid: child.child.pid as number };
}

/** SHA-256 of `total` bytes of `unit` repeated, computed in 1 MiB steps (never held whole). */
export function repeatedDigest(unit: Buffer, total: number): string {
  const buf = Buffer.concat(Array.from({ length: Math.max(1, Math.floor(MiB / unit.length)) }, () => unit));
  const hash = createHash('sha256');
  let left = total;
  while (left > 0) {
    const n = Math.min(left, buf.length);
    hash.update(buf.subarray(0, n));
    left -= n;
  }
  return hash.digest('hex');
}

/**
 * Ids only grow; every jump is announced by a `lagged` event whose id is the
 * last missed one and whose `dropped` covers the jump; `completed` is last.
 */
export function expectGapsAccounted(events: SseEvent[]): { lagged: number; dropped: number } {
  let prev = 0;
  let lagged = 0;
  let dropped = 0;
  for (const e of events) {
    const data = subscriptionEventSchema.parse(JSON.parse(e.data));
    const id = Number(e.id);
    if (data.type === 'lagged') {
      expect(id).toBe(prev + data.dropped);
      lagged++;
      dropped += data.dropped;
    } else {
      expect(id).toBe(prev + 1);
    }
    prev = id;
  }
  expect(events.at(-1)?.event).toBe('completed');
  expect(events.filter((e) => e.event === 'completed')).toHaveLength(1);
  return { lagged, dropped };
}
