/**
 * Manifests, fuzzed: random JSON, near-manifests (the right kind with
 * damaged fields: bad names, digests, counts, duplicates, extra fields, too
 * many streams) and valid manifests over real and missing blobs are stored as
 * blobs and read with a stream suffix, through the store and through the
 * read tool. Every read is a page or exactly one of ENOTMANIFEST,
 * EUNKNOWNSTREAM, ENOTFOUND, EINTEGRITY (a stream whose size disagrees with
 * its entry), never anything else; a valid manifest over present blobs reads
 * each stream exactly. GC and verify run over all of it without failing.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { decodeManifest, MANIFEST_KIND } from '../../store/manifest.js';
import { sha256, soak, soakTimeout } from '../support/invariants.js';
import { type Isolated, isolatedEngine } from '../support/isolated.js';

let iso: Isolated;
/** Real blobs: content by digest. */
const present = new Map<string, string>();

beforeAll(async () => {
  iso = await isolatedEngine();
  for (const text of ['', 'one line\n', 'two\nlines\n', 'no newline', 'ü\n']) {
    const info = await iso.engine.store.publishBytes(text);
    present.set(info.digest, text);
  }
});
afterAll(async () => {
  await iso?.close();
});

const ALLOWED = new Set(['ENOTMANIFEST', 'EUNKNOWNSTREAM', 'ENOTFOUND', 'EINTEGRITY']);
const names = fc.oneof(
  fc.constantFrom('stdout', 'stderr', 'results', 'a', 'x.y'),
  fc.string({ maxLength: 8 }),
  fc.constantFrom('', '.', '..', 'a/b', 'x'.repeat(65)),
);
const digestArb = fc.oneof(
  fc.constantFrom(...[...Array(5)].map((_, i) => i)).map((i) => [...present.keys()][i] as string),
  fc.constant(sha256('absent blob')),
  fc.string({ unit: fc.constantFrom(...'0123456789abcdefA'), minLength: 60, maxLength: 66 }),
);
const countArb = fc.oneof(
  fc.nat(20),
  fc.integer({ min: -3, max: -1 }),
  fc.double(),
  fc.constant(2 ** 60),
  fc.jsonValue({ maxDepth: 0 }),
);

/** A stream entry, usually consistent with the blob it names, sometimes not. */
const entryArb = fc
  .tuple(
    names,
    digestArb,
    fc.boolean(),
    countArb,
    countArb,
    fc.option(fc.jsonValue({ maxDepth: 1 }), { nil: undefined }),
  )
  .map(([name, digest, honest, bytes, lines, extra]) => {
    const text = present.get(digest);
    const e: Record<string, unknown> = {
      name,
      digest,
      bytes: honest && text !== undefined ? Buffer.byteLength(text) : bytes,
      lines:
        honest && text !== undefined
          ? (text.match(/\n/g)?.length ?? 0) + (text && !text.endsWith('\n') ? 1 : 0)
          : lines,
    };
    if (extra !== undefined) e.extra = extra;
    return e;
  });

const manifestText = fc.oneof(
  { weight: 2, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
  {
    weight: 5,
    arbitrary: fc
      .tuple(
        fc.array(entryArb, { maxLength: 18 }),
        fc.constantFrom(MANIFEST_KIND, 'sluice.manifest/2', 'other'),
        fc.boolean(),
      )
      .map(([streams, kind, pretty]) => JSON.stringify({ kind, streams }, null, pretty ? 2 : undefined)),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 100 }) },
);

/** A valid manifest over present blobs, and a probe that is usually one of its streams. */
const validCase = fc
  .uniqueArray(fc.constantFrom('stdout', 'stderr', 'results', 'a', 'x.y', 'Z_9-'), { minLength: 1, maxLength: 4 })
  .chain((streamNames) =>
    fc.tuple(
      fc.tuple(...streamNames.map(() => fc.nat(4))).map((picks) => {
        const keys = [...present.keys()];
        const streams = streamNames.map((name, i) => {
          const digest = keys[picks[i] as number] as string;
          const text = present.get(digest) as string;
          const lines = (text.match(/\n/g)?.length ?? 0) + (text && !text.endsWith('\n') ? 1 : 0);
          return { name, digest, bytes: Buffer.byteLength(text), lines };
        });
        return `${JSON.stringify({ kind: MANIFEST_KIND, streams })}\n`;
      }),
      fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...streamNames) }, { weight: 1, arbitrary: names }),
    ),
  );

describe('random manifests (fast-check)', () => {
  it(
    'a stream read is a page or ENOTMANIFEST / EUNKNOWNSTREAM / ENOTFOUND / EINTEGRITY, never anything else',
    async () => {
      let pages = 0;
      let manifests = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(fc.tuple(manifestText, names), validCase),
          fc.boolean(),
          async ([text, probe], viaTool) => {
            const { digest } = await iso.engine.store.publishBytes(text);
            const decoded = decodeManifest(text);
            if (decoded) manifests++;
            const entry = decoded?.streams.find((s) => s.name === probe);
            const uri = `artifact://${digest}/${probe}`;
            const outcome = await (viaTool ? iso.engine.read(uri) : iso.engine.store.readPage(uri)).then(
              (p) => ({ content: p.content }),
              (err: { code?: string }) => ({ code: err.code }),
            );
            const ctx = `${text.slice(0, 200)} / ${JSON.stringify(probe)}`;
            if ('content' in outcome) {
              pages++;
              // Only a valid manifest with that stream over a present blob of the recorded size reads.
              expect(entry, ctx).toBeDefined();
              expect(outcome.content, ctx).toBe(present.get(entry?.digest as string));
              return;
            }
            if (!/^[A-Za-z0-9._-]{1,64}$/.test(probe) || probe === '.' || probe === '..') {
              expect(outcome.code, ctx).toBe('EBADURI');
              return;
            }
            expect(ALLOWED.has(outcome.code as string), `${ctx} → ${outcome.code}`).toBe(true);
            if (!decoded) expect(outcome.code, ctx).toBe('ENOTMANIFEST');
            else if (!entry) expect(outcome.code, ctx).toBe('EUNKNOWNSTREAM');
            else if (!present.has(entry.digest)) expect(outcome.code, ctx).toBe('ENOTFOUND');
            else expect(outcome.code, ctx).toBe('EINTEGRITY');
          },
        ),
        { numRuns: soak(300) },
      );
      // The generators reached the interesting cases.
      expect(manifests).toBeGreaterThan(5);
      expect(pages).toBeGreaterThan(20);
      // Whole-store passes over all those blobs: verify lists what valid manifests miss, GC keeps going.
      const report = await iso.engine.verify();
      expect(report.corrupt).toEqual([]);
      expect(report.missing.every((d) => !present.has(d))).toBe(true);
      const gc = await collectGarbage(iso.engine.store, { dryRun: true, graceMs: 0 });
      expect(gc.scanned).toBeGreaterThan(present.size);
      await iso.expectUntouched();
    },
    soakTimeout(60_000),
  );
});
