import { isAbsolute, relative, sep } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../engine/protocol/errors.js';
import { StoreLayout } from '../../store/layout.js';
import { formatArtifactUri, isArtifactUri, parseArtifactUri } from '../../store/uri.js';

const D = 'a'.repeat(8) + '0123456789abcdef'.repeat(3) + 'f'.repeat(8);

/** The grammar from design.md, written independently of the parser: the oracle. */
const ORACLE = /^artifact:\/\/[0-9a-f]{64}(\/[A-Za-z0-9._-]{1,64})?$/;
function oracleAccepts(s: string): boolean {
  if (!ORACLE.test(s)) return false;
  const stream = s.slice('artifact://'.length + 65);
  return stream !== '.' && stream !== '..';
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof SluiceError ? err.code : 'not a SluiceError';
  }
}

describe('artifact URI grammar', () => {
  it('accepts a bare digest and a digest with one valid stream name', () => {
    expect(parseArtifactUri(`artifact://${D}`)).toEqual({ digest: D });
    expect(parseArtifactUri(`artifact://${D}/stdout`)).toEqual({ digest: D, stream: 'stdout' });
    expect(parseArtifactUri(`artifact://${D}/a.b_c-D9`)).toEqual({ digest: D, stream: 'a.b_c-D9' });
    expect(parseArtifactUri(`artifact://${D}/${'s'.repeat(64)}`)).toEqual({ digest: D, stream: 's'.repeat(64) });
    expect(parseArtifactUri(`artifact://${D}/...`)).toEqual({ digest: D, stream: '...' });
  });

  it.each([
    ['uppercase digest', `artifact://${D.toUpperCase()}`],
    ['one uppercase hex digit', `artifact://${D.slice(0, 63)}F`],
    ['63 hex characters', `artifact://${D.slice(1)}`],
    ['65 hex characters', `artifact://${D}0`],
    ['non-hex character', `artifact://${D.slice(0, 63)}g`],
    ['query', `artifact://${D}?x=1`],
    ['query after stream', `artifact://${D}/stdout?x`],
    ['fragment', `artifact://${D}#frag`],
    ['fragment after stream', `artifact://${D}/stdout#x`],
    ['percent-escape in stream', `artifact://${D}/std%6Fut`],
    ['percent-escaped slash', `artifact://${D}%2Fstdout`],
    ['extra segment', `artifact://${D}/stdout/more`],
    ['trailing slash', `artifact://${D}/`],
    ['trailing slash after stream', `artifact://${D}/stdout/`],
    ['double slash', `artifact://${D}//stdout`],
    ['dot stream', `artifact://${D}/.`],
    ['dot-dot stream', `artifact://${D}/..`],
    ['traversal', `artifact://${D}/../../etc/passwd`],
    ['empty', ''],
    ['scheme only', 'artifact://'],
    ['uppercase scheme', `ARTIFACT://${D}`],
    ['mixed-case scheme', `Artifact://${D}`],
    ['single slash', `artifact:/${D}`],
    ['no slashes', `artifact:${D}`],
    ['storage-format internal URI', `artifact://sha256/${D}`],
    ['leading space', ` artifact://${D}`],
    ['trailing space', `artifact://${D} `],
    ['trailing newline', `artifact://${D}\n`],
    ['newline in stream', `artifact://${D}/std\nout`],
    ['NUL in stream', `artifact://${D}/std\u0000out`],
    ['DEL in stream', `artifact://${D}/std\u007fout`],
    ['space in stream', `artifact://${D}/std out`],
    ['backslash in stream', `artifact://${D}/std\\out`],
    ['non-ASCII stream', `artifact://${D}/stdöut`],
    ['65-byte stream name', `artifact://${D}/${'s'.repeat(65)}`],
    ['userinfo', `artifact://user@${D}`],
    ['port', `artifact://${D}:80`],
  ])('rejects %s with EBADURI', (_label, uri) => {
    expect(codeOf(() => parseArtifactUri(uri))).toBe('EBADURI');
  });

  it('formats what it parses, both ways', () => {
    expect(formatArtifactUri(D)).toBe(`artifact://${D}`);
    expect(formatArtifactUri(D, 'stderr')).toBe(`artifact://${D}/stderr`);
    expect(parseArtifactUri(formatArtifactUri(D, 'x'))).toEqual({ digest: D, stream: 'x' });
  });

  it('dispatches any artifact-scheme string as an artifact URI, whatever its case, so it is never read as a path', () => {
    // `ARTIFACT://...` must never fall through to a filesystem read as a relative path.
    for (const s of [`artifact://${D}`, `ARTIFACT://${D}`, `Artifact://x`, 'artifact:x', 'artifact:']) {
      expect(isArtifactUri(s), s).toBe(true);
    }
    for (const s of ['./artifact://x', 'file.txt', '/tmp/artifact', ' artifact://x', 'artifacts://x']) {
      expect(isArtifactUri(s), s).toBe(false);
    }
  });
});

const hex = fc.constantFrom(...'0123456789abcdef');
const digestArb = fc.string({ unit: hex, minLength: 64, maxLength: 64 });
const nameChar = fc.constantFrom(...'abcxyzABCXYZ0189._-');
const streamArb = fc.string({ unit: nameChar, minLength: 1, maxLength: 64 }).filter((s) => s !== '.' && s !== '..');
const validUri = fc.tuple(digestArb, fc.option(streamArb, { nil: undefined })).map(([d, s]) => formatArtifactUri(d, s));

/** Characters that break the grammar in interesting ways, mixed with harmless ones. */
const nastyChar = fc.constantFrom(
  '/',
  '?',
  '#',
  '%',
  '.',
  '..',
  '\\',
  ' ',
  '\n',
  '\r',
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
  'a',
  '0',
  '-',
);

type Mutation =
  | { kind: 'insert' | 'replace'; at: number; text: string }
  | { kind: 'delete'; at: number; count: number };
const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), text: nastyChar }),
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), text: nastyChar }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 3 }) }),
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

describe('artifact URI grammar (fast-check)', () => {
  it('never accepts a mutated URI outside the grammar; every rejection is EBADURI', () => {
    fc.assert(
      fc.property(validUri, fc.array(mutationArb, { minLength: 1, maxLength: 4 }), (uri, muts) => {
        const s = mutate(uri, muts);
        const code = codeOf(() => parseArtifactUri(s));
        if (oracleAccepts(s)) expect(code).toBeUndefined();
        else expect(code).toBe('EBADURI');
      }),
      { numRuns: 5000 },
    );
  });

  it('never accepts arbitrary text after the scheme unless it is exactly a digest and stream', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 140 }), (tail) => {
        const s = `artifact://${tail}`;
        const code = codeOf(() => parseArtifactUri(s));
        expect(code === undefined).toBe(oracleAccepts(s));
        if (code !== undefined) expect(code).toBe('EBADURI');
      }),
      { numRuns: 3000 },
    );
  });

  it('maps every accepted URI to a path inside blobs/, at blobs/sha256/<2 hex>/<62 hex>', () => {
    const layout = new StoreLayout('/srv/store');
    fc.assert(
      fc.property(fc.oneof(validUri, fc.tuple(validUri, fc.array(mutationArb, { maxLength: 3 }))), (input) => {
        const s = typeof input === 'string' ? input : mutate(input[0], input[1]);
        let parsed: ReturnType<typeof parseArtifactUri>;
        try {
          parsed = parseArtifactUri(s);
        } catch {
          return;
        }
        const rel = relative(layout.blobs, layout.blobPath(parsed.digest));
        expect(isAbsolute(rel)).toBe(false);
        expect(rel.startsWith('..')).toBe(false);
        expect(rel.split(sep)).toEqual([parsed.digest.slice(0, 2), parsed.digest.slice(2)]);
      }),
      { numRuns: 3000 },
    );
  });
});
