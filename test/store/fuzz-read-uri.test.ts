/**
 * Artifact URIs fuzzed end to end through the read tool (Engine.read: a real
 * worker, prepare, approval, page capture), with the process's cwd and HOME
 * set to fresh empty directories. Random mutations of real URIs and random
 * text after the scheme must give exactly what the grammar says: a page (or
 * ENOTFOUND, ENOTMANIFEST, EUNKNOWNSTREAM by what the store holds) for an
 * exact URI, EBADURI for anything else with the artifact scheme, and never
 * EBADURI for a plain path. Nothing outside the store is touched, and the
 * store itself is unchanged by reads.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isErrorCode } from '../../engine/protocol/errors.js';
import { isArtifactUri } from '../../store/uri.js';
import { entriesUnder, soak, soakTimeout } from '../support/invariants.js';
import { type Isolated, isolatedEngine } from '../support/isolated.js';

const ORACLE = /^artifact:\/\/[0-9a-f]{64}(\/[A-Za-z0-9._-]{1,64})?$/;
function oracle(s: string): { digest: string; stream?: string } | undefined {
  if (!ORACLE.test(s)) return undefined;
  const digest = s.slice(11, 75);
  const stream = s.length > 75 ? s.slice(76) : undefined;
  if (stream === '.' || stream === '..') return undefined;
  return stream === undefined ? { digest } : { digest, stream };
}

const NASTY = [
  '/',
  '?',
  '#',
  '%',
  '.',
  '..',
  '\\',
  ' ',
  '\n',
  '\t',
  '\u0000',
  '\u007f',
  '\u0085',
  '\u202e',
  'A',
  'F',
  'g',
  'é',
  '😀',
  '%2e',
  '%2F',
  ':',
  '@',
  '~',
  'a',
  '0',
  '-',
  'stdout',
  '../',
];
type Mutation =
  | { kind: 'insert' | 'replace'; at: number; text: string }
  | { kind: 'delete'; at: number; count: number };
const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), text: fc.constantFrom(...NASTY) }),
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), text: fc.constantFrom(...NASTY) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 4 }) }),
);
function mutate(s: string, muts: readonly Mutation[]): string {
  for (const m of muts) {
    const at = m.at % (s.length + 1);
    if (m.kind === 'delete') s = s.slice(0, at) + s.slice(at + m.count);
    else if (m.kind === 'insert') s = s.slice(0, at) + m.text + s.slice(at);
    else s = s.slice(0, at) + m.text + s.slice(at + 1);
  }
  return s;
}

let iso: Isolated;
let manifest: string;
let plain: string;
let storeBefore: string[];

beforeAll(async () => {
  iso = await isolatedEngine();
  const r = await iso.engine.run('bash', { command: 'printf "out\\n"; printf "err\\n" >&2' });
  if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
  manifest = r.output.manifest;
  plain = (await iso.engine.store.publishBytes('plain text\n')).digest;
  // First reads verify the blobs (and remember it); later reads change nothing on disk.
  for (const u of [manifest, `${manifest}/stdout`, `${manifest}/stderr`, plain])
    await iso.engine.read(`artifact://${u}`);
  storeBefore = await entriesUnder(iso.storeDir);
});

afterAll(async () => {
  await iso?.close();
});

/** What reading `s` must give: a page (`ok`) or an error code. */
function expected(s: string): { ok: true } | { code: string } | { pathCodes: true } {
  if (!isArtifactUri(s.trimStart())) return { pathCodes: true };
  const uri = oracle(s);
  if (!uri) return { code: 'EBADURI' };
  if (uri.digest === manifest) {
    if (uri.stream === undefined || uri.stream === 'stdout' || uri.stream === 'stderr') return { ok: true };
    return { code: 'EUNKNOWNSTREAM' };
  }
  if (uri.digest === plain) return uri.stream === undefined ? { ok: true } : { code: 'ENOTMANIFEST' };
  return { code: 'ENOTFOUND' };
}

async function outcome(s: string): Promise<{ ok: true } | { code: string }> {
  try {
    await iso.engine.read(s, { timeoutMs: 10_000 });
    return { ok: true };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (!isErrorCode(code)) throw new Error(`read(${JSON.stringify(s)}) threw a non-sluice error: ${String(err)}`);
    return { code };
  }
}

const PATH_CODES = new Set(['ENOTFOUND', 'EDENIED', 'EBADARGS', 'EBINARY']);

async function check(s: string): Promise<void> {
  const want = expected(s);
  const got = await outcome(s);
  if ('pathCodes' in want) {
    // A plain path: read from the (empty) working directory, or denied outside it; never an artifact error.
    if ('code' in got) expect(PATH_CODES.has(got.code), `${JSON.stringify(s)} → ${got.code}`).toBe(true);
  } else {
    expect(got, JSON.stringify(s)).toEqual(want);
  }
}

describe('artifact URIs through the read tool (fast-check)', () => {
  it(
    'mutated real URIs read, fail with the store’s code, or fail with EBADURI exactly as the grammar says',
    async () => {
      const base = fc.constantFrom(
        () => `artifact://${manifest}`,
        () => `artifact://${manifest}/stdout`,
        () => `artifact://${manifest}/stderr`,
        () => `artifact://${plain}`,
        () => `artifact://${plain}/stdout`,
      );
      await fc.assert(
        fc.asyncProperty(base, fc.array(mutationArb, { minLength: 0, maxLength: 3 }), async (make, muts) => {
          await check(mutate(make(), muts));
        }),
        { numRuns: soak(250) },
      );
    },
    soakTimeout(60_000),
  );

  it(
    'random text after any spelling of the scheme is EBADURI unless it is exactly a digest and a stream',
    async () => {
      const scheme = fc.constantFrom(
        'artifact://',
        'ARTIFACT://',
        'Artifact://',
        'artifact:',
        'artifact:/',
        ' artifact://',
      );
      const tail = fc.oneof(
        fc.string({ unit: 'binary', maxLength: 100 }),
        fc
          .tuple(fc.constantFrom(manifest, plain, 'f'.repeat(64)), fc.string({ unit: 'binary', maxLength: 20 }))
          .map(([d, t]) => d + t),
      );
      await fc.assert(
        fc.asyncProperty(scheme, tail, async (sch, t) => {
          await check(sch === 'artifact://' && t.length === 0 ? `${sch}${manifest}` : sch + t);
        }),
        { numRuns: soak(150) },
      );
    },
    soakTimeout(60_000),
  );

  it('left cwd and HOME empty and the store unchanged', async () => {
    await iso.expectUntouched();
    expect(await entriesUnder(iso.storeDir)).toEqual(storeBefore);
  });
});
