/**
 * Stream names, fuzzed: the one validator, output declarations, the artifact
 * URI parser and the manifest schema accept exactly the same names (and an
 * independent oracle written from the design agrees); through the real
 * engine, a tool module declaring random names registers exactly when they
 * are all valid and distinct (EBADDECL otherwise), and each declared stream
 * reads back by name through its manifest, while an undeclared valid name is
 * EUNKNOWNSTREAM and an invalid one EBADURI.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { distPath } from '../../engine/pool/dist-paths.js';
import { SluiceError } from '../../engine/protocol/errors.js';
import { MAX_STREAMS, streamNameProblem, validateDeclaration } from '../../engine/protocol/streams.js';
import { manifestSchema } from '../../store/manifest.js';
import { parseArtifactUri } from '../../store/uri.js';
import { makeTempDir, removeDir, soak, soakTimeout } from '../support/invariants.js';
import { type Isolated, isolatedEngine } from '../support/isolated.js';

const D = '0123456789abcdef'.repeat(4);

/** The rule from docs/design, written independently: 1-64 of [A-Za-z0-9._-], not . or .. */
function oracle(s: string): boolean {
  return /^[A-Za-z0-9._-]{1,64}$/.test(s) && s !== '.' && s !== '..';
}

const nameChars = fc.constantFrom(...'abcXYZ019._-');
const nastyChars = fc.constantFrom(
  '/',
  '\\',
  ' ',
  '\n',
  '\t',
  '\u0000',
  '\u007f',
  '\u0085',
  'é',
  '😀',
  '%',
  '?',
  '#',
  ':',
  '\u202e',
  '.',
);
/** Names near the boundary: mostly valid characters, sometimes one bad one, lengths around 64. */
const nameArb = fc.oneof(
  fc.string({ unit: nameChars, minLength: 0, maxLength: 70 }),
  fc
    .tuple(fc.string({ unit: nameChars, maxLength: 66 }), nastyChars, fc.nat())
    .map(([s, c, at]) => s.slice(0, at % (s.length + 1)) + c + s.slice(at % (s.length + 1))),
  fc.constantFrom('.', '..', '...', '', 'a'.repeat(64), 'a'.repeat(65), 'stdout', 'STDOUT', '-', '_'),
  fc.string({ unit: 'binary', maxLength: 20 }),
);

function accepts(fn: () => unknown, code: string): boolean {
  try {
    fn();
    return true;
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError);
    expect((err as SluiceError).code).toBe(code);
    return false;
  }
}

describe('one rule for stream names (fast-check)', () => {
  it('validator, declarations, URI lookup, manifest schema and the oracle agree on every name', () => {
    fc.assert(
      fc.property(nameArb, (name) => {
        const valid = streamNameProblem(name) === undefined;
        expect(valid).toBe(oracle(name));
        expect(accepts(() => validateDeclaration(['zz-other-stream', name]), 'EBADDECL')).toBe(
          valid && name !== 'zz-other-stream',
        );
        expect(accepts(() => parseArtifactUri(`artifact://${D}/${name}`), 'EBADURI')).toBe(valid);
        if (valid) expect(parseArtifactUri(`artifact://${D}/${name}`)).toEqual({ digest: D, stream: name });
        const entry = { name, digest: D, bytes: 0, lines: 0 };
        expect(manifestSchema.safeParse({ kind: 'sluice.manifest/1', streams: [entry] }).success).toBe(valid);
      }),
      { numRuns: soak(2000) },
    );
  });
});

let iso: Isolated;
let modules: string;
let serial = 0;

beforeAll(async () => {
  iso = await isolatedEngine();
  modules = await makeTempDir('sluice-fz-mod-');
});
afterAll(async () => {
  await iso?.close();
  await removeDir(modules);
});

/** A tool module declaring `names` that writes `<index>:<name>\n` to each stream. */
async function writeModule(names: readonly string[]): Promise<{ path: string; tool: string }> {
  const tool = `fz${serial++}`;
  const toolUrl = pathToFileURL(distPath('workers/tool.js')).href;
  const src = `import { defineTool, z } from ${JSON.stringify(toolUrl)};
const names = ${JSON.stringify(names)};
export default defineTool({
  name: ${JSON.stringify(tool)},
  description: 'fuzzed declaration',
  args: z.object({}),
  output: names,
  async run(_args, ctx) {
    for (const [i, n] of names.entries()) await new Promise((r) => ctx.stream(n).write(i + ':' + n + '\\n', r));
  },
});
`;
  const path = join(modules, `${tool}.mjs`);
  await fsp.writeFile(path, src);
  return { path, tool };
}

describe('random declarations through the engine (fast-check)', () => {
  it(
    'register exactly when valid; every declared stream reads back by name, in order',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.oneof({ weight: 4, arbitrary: nameArb.filter(oracle) }, { weight: 1, arbitrary: nameArb }), {
            minLength: 0,
            maxLength: 18,
          }),
          nameArb,
          async (names, probe) => {
            const valid =
              names.length > 0 &&
              names.length <= MAX_STREAMS &&
              names.every(oracle) &&
              new Set(names).size === names.length;
            const { path, tool } = await writeModule(names);
            const registered = await iso.engine.register(path).then(
              () => undefined,
              (err: { code?: string }) => err.code,
            );
            if (!valid) {
              expect(registered, JSON.stringify(names)).toBe('EBADDECL');
              return;
            }
            expect(registered, JSON.stringify(names)).toBeUndefined();
            const r = await iso.engine.run(tool, {});
            expect(r.status).toBe('success');
            if (r.output?.kind !== 'streams') throw new Error('expected streams');
            expect(r.output.streams.map((s) => s.name)).toEqual(names);
            for (const [i, n] of names.entries()) {
              const page = await iso.engine.store.readPage(`artifact://${r.output.manifest}/${n}`);
              expect(page.content).toBe(`${i}:${n}\n`);
            }
            const want = !oracle(probe) ? 'EBADURI' : names.includes(probe) ? undefined : 'EUNKNOWNSTREAM';
            const got = await iso.engine.store.readPage(`artifact://${r.output.manifest}/${probe}`).then(
              () => undefined,
              (err: { code?: string }) => err.code,
            );
            expect(got, JSON.stringify(probe)).toBe(want);
          },
        ),
        { numRuns: soak(25) },
      );
      await iso.expectUntouched();
    },
    soakTimeout(60_000),
  );
});
