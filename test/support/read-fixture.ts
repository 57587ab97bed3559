/**
 * Shared fixtures for the read tool tests: an engine on a fresh store and
 * working directory (closed and removed when the test finishes), an approval
 * spy, the leak checks every failure path ends with, and on-the-fly content
 * generation so no test holds a large output whole.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import type { ApprovalPolicy } from '../../engine/call/call-types.js';
import { defaultApproval, Engine, type EngineOpenOptions } from '../../engine/engine.js';
import type { PreparedOperation } from '../../engine/protocol/messages.js';
import { tempDir } from '../store/helpers.js';

export { CLI, expectNoLeaks, flipBit, sha256, sluice, tempDir } from '../store/helpers.js';

/** A 64-hex digest nothing in any store has. */
export const ABSENT = 'f'.repeat(64);

/** An engine with its own store (`<root>/store`) and working directory (`<root>/work`). */
export interface ReadFixture {
  engine: Engine;
  root: string;
  cwd: string;
  storeDir: string;
  /** Every operation the approval policy was asked about, in order. */
  ops: PreparedOperation[];
}

/**
 * Opens an engine whose approval policy is the default one for `cwd`, wrapped
 * so the test sees every prepared operation. Closed when the test finishes.
 */
export async function openFixture(options: Omit<EngineOpenOptions, 'store' | 'cwd'> = {}): Promise<ReadFixture> {
  const root = await tempDir('sluice-read-');
  const cwd = join(root, 'work');
  const storeDir = join(root, 'store');
  await fsp.mkdir(cwd);
  const ops: PreparedOperation[] = [];
  const inner: ApprovalPolicy = options.approve ?? defaultApproval(cwd);
  const approve: ApprovalPolicy = (op, call) => {
    ops.push(structuredClone(op));
    return inner(op, call);
  };
  const engine = await Engine.open({ minThreads: 1, ...options, store: storeDir, cwd, approve });
  onTestFinished(() => engine.close());
  return { engine, root, cwd, storeDir, ops };
}

/** Files under the store's blobs/ (what a retained artifact would add to). */
export async function blobCount(storeDir: string): Promise<number> {
  const entries = await fsp.readdir(join(storeDir, 'blobs'), { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).length;
}

/** The failure code of a rejected promise (asserting that it rejected). */
export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return String((err as { code?: unknown }).code);
  }
  throw new Error('expected a rejection');
}

/** Incremental SHA-256 of text pages, so a test can compare a whole stream without holding it. */
export class Hasher {
  private readonly h = createHash('sha256');
  bytes = 0;
  update(text: string): void {
    this.h.update(text, 'utf8');
    this.bytes += Buffer.byteLength(text, 'utf8');
  }
  digest(): string {
    return this.h.digest('hex');
  }
}

/** SHA-256 and size of `seq 1 n` output, computed without building it whole. */
export function seqDigest(n: number): { digest: string; bytes: number } {
  const h = new Hasher();
  let parts: string[] = [];
  for (let i = 1; i <= n; i++) {
    parts.push(`${i}\n`);
    if (parts.length === 4096) {
      h.update(parts.join(''));
      parts = [];
    }
  }
  h.update(parts.join(''));
  return { digest: h.digest(), bytes: h.bytes };
}

/** The `[Truncated. Read more: read(filePath="…", offset=N)]` hints of a model view. */
export function hintsOf(model: string): Array<{ uri: string; offset: number }> {
  const re = /\[Truncated\. Read more: read\(filePath="(artifact:\/\/[^"]+)", offset=(\d+)\)\]/g;
  return [...model.matchAll(re)].map((m) => ({ uri: m[1] as string, offset: Number(m[2]) }));
}

/** The `[More: read(filePath=…, offset=N)]` line of a page view, if any. */
export function moreOf(model: string): { filePath: string; offset: number } | undefined {
  const m = /\n?\[More: read\(filePath=("(?:[^"\\]|\\.)*"), offset=(\d+)\)\]\n$/.exec(model);
  return m ? { filePath: JSON.parse(m[1] as string) as string, offset: Number(m[2]) } : undefined;
}
