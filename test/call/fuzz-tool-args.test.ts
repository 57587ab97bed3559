/**
 * Random arguments to the built-in tools, through the real engine, with cwd
 * and HOME set to fresh empty directories: any JSON (and values JSON cannot
 * carry) to bash and read must end in EBADARGS (thrown at once for non-JSON
 * values, else as the call's result) or a terminal result with a coded
 * outcome, never a worker crash, a protocol or disk error, or a hang. Calls
 * recorded in a session replay with exactly the arguments given (as JSON).
 * The commands bash may run are harmless ones, and nothing may appear in
 * cwd or HOME.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isErrorCode } from '../../engine/protocol/errors.js';
import type { TerminalResult } from '../../engine/result.js';
import { soak, soakTimeout, within } from '../support/invariants.js';
import { type Isolated, isolatedEngine } from '../support/isolated.js';

let iso: Isolated;
beforeAll(async () => {
  iso = await isolatedEngine({ concurrency: 4 });
});
afterAll(async () => {
  await iso?.close();
});

/** Codes a read may end with for arbitrary input; anything else (EWORKERCRASH, EPROTOCOL, EDISK) is a bug. */
const READ_CODES = new Set([
  'EBADARGS',
  'ENOTFOUND',
  'EDENIED',
  'EBADURI',
  'EBINARY',
  'ERESOURCELIMIT',
  'ENOTMANIFEST',
  'EUNKNOWNSTREAM',
]);
const BASH_CODES = new Set(['EBADARGS', 'ETIMEOUT', 'ETOOLFAILED']);

const HARMLESS = fc.constantFrom(
  'true',
  'echo ok',
  'printf x',
  'exit 3',
  'echo err >&2',
  ':',
  'echo "$HOME" >/dev/null',
);
const NOT_JSON = fc.constantFrom<unknown>(
  Number.NaN,
  Number.POSITIVE_INFINITY,
  () => 1,
  Symbol('s'),
  10n,
  new Date(0),
  new Map([[1, 2]]),
  /re/,
  new Uint8Array(2),
);

function withNonJson(arb: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 6, arbitrary: arb },
    { weight: 1, arbitrary: NOT_JSON },
    { weight: 1, arbitrary: fc.record({ command: HARMLESS, extra: NOT_JSON }) },
    { weight: 1, arbitrary: fc.record({ filePath: fc.constant('.'), offset: NOT_JSON }) },
  );
}

const bashArgs = withNonJson(
  fc.oneof(
    fc.jsonValue(),
    fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
    // Any JSON but a string as the command: a random string is a random shell command (`x>name` creates
    // a file in cwd), and the commands bash runs here are the harmless ones.
    fc.record({ command: fc.jsonValue({ maxDepth: 1 }).filter((v) => typeof v !== 'string') }),
    fc.record(
      {
        command: HARMLESS,
        timeout: fc.oneof(fc.jsonValue({ maxDepth: 0 }), fc.integer(), fc.double(), fc.constant(50_000)),
        cwd: fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('/nonexistent/dir', '.', '/', '')),
      },
      { requiredKeys: ['command'] },
    ),
    fc.record({ command: fc.constant(`echo ${'x'.repeat(140_000)}`) }),
    // Well-formed calls, so the tool itself runs often.
    fc.record({ command: HARMLESS, timeout: fc.integer({ min: 1000, max: 60_000 }) }, { requiredKeys: ['command'] }),
    fc.record({ command: HARMLESS }),
  ),
);

const PATHS = fc.oneof(
  fc.string({ minLength: 1, maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom(
    '~',
    '~/x',
    '.',
    '..',
    '/',
    '/etc/passwd',
    '../../etc/passwd',
    './a/../../..',
    '\u0000',
    'artifact://x',
  ),
);

const readArgs = withNonJson(
  fc.oneof(
    fc.jsonValue(),
    fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
    fc.record(
      {
        filePath: PATHS,
        offset: fc.oneof(fc.jsonValue({ maxDepth: 0 }), fc.integer(), fc.double(), fc.constant(2 ** 53)),
        limit: fc.oneof(fc.jsonValue({ maxDepth: 0 }), fc.integer({ min: -5, max: 3000 }), fc.double()),
      },
      { requiredKeys: ['filePath'] },
    ),
    fc.record(
      { filePath: fc.constantFrom('.', './', './/.'), offset: fc.nat(5), limit: fc.integer({ min: 1, max: 2000 }) },
      { requiredKeys: ['filePath'] },
    ),
    fc.record({ filePath: PATHS }),
  ),
);

/** A short printable form of any value (JSON.stringify throws on some). */
function show(v: unknown): string {
  return fc.stringify(v).slice(0, 120);
}

/** Runs one call: a thrown EBADARGS (non-JSON arguments) or the terminal result. */
async function attempt(tool: string, args: unknown, session?: string): Promise<{ thrown: string } | TerminalResult> {
  let handle: ReturnType<typeof iso.engine.call>;
  try {
    handle = iso.engine.call(tool, args, { timeoutMs: 15_000, ...(session ? { session } : {}) });
  } catch (err) {
    return { thrown: String((err as { code?: unknown }).code) };
  }
  return within(30_000, `${tool}(${show(args)})`, handle.result);
}

/** Outcomes seen, by tool: a check that the fuzzing reached both the tools and their argument checks. */
const tally = new Map<string, number>();
function count(key: string): void {
  tally.set(key, (tally.get(key) ?? 0) + 1);
}

function expectCoded(tool: string, args: unknown, r: { thrown: string } | TerminalResult, allowed: Set<string>): void {
  const ctx = `${tool} ${show(args)}`;
  count(`${tool} ${'thrown' in r ? `thrown ${r.thrown}` : (r.error?.code ?? r.status)}`);
  if ('thrown' in r) {
    expect(r.thrown, ctx).toBe('EBADARGS');
    return;
  }
  expect(['success', 'failed'], ctx).toContain(r.status);
  if (r.error) {
    expect(isErrorCode(r.error.code), ctx).toBe(true);
    expect(allowed.has(r.error.code), `${ctx} → ${r.error.code}: ${r.error.message}`).toBe(true);
  }
}

describe('random tool arguments (fast-check)', () => {
  it(
    'bash: EBADARGS or a coded result, never a crash or a hang; recorded arguments replay as given',
    async () => {
      const recorded: Array<{ callId: string; args: unknown }> = [];
      await fc.assert(
        fc.asyncProperty(bashArgs, fc.boolean(), async (args, inSession) => {
          const r = await attempt('bash', args, inSession ? 'fuzz-bash' : undefined);
          expectCoded('bash', args, r, BASH_CODES);
          if (inSession && !('thrown' in r)) recorded.push({ callId: r.callId, args });
        }),
        { numRuns: soak(120) },
      );
      expect(tally.get('bash success') ?? 0).toBeGreaterThan(5);
      expect(tally.get('bash EBADARGS') ?? 0).toBeGreaterThan(5);
      expect(tally.get('bash thrown EBADARGS') ?? 0).toBeGreaterThan(0);
      if (recorded.length > 0) {
        const replayed = await iso.engine.replay('fuzz-bash');
        expect(replayed.corruptLines).toBe(0);
        const byId = new Map(replayed.calls.map((c) => [c.callId, c.args]));
        for (const c of recorded) expect(byId.get(c.callId)).toEqual(JSON.parse(JSON.stringify(c.args) ?? 'null'));
      }
      await iso.expectUntouched();
    },
    soakTimeout(60_000),
  );

  it(
    'read: EBADARGS or a coded result, never a crash or a hang, and nothing outside the store is touched',
    async () => {
      await fc.assert(
        fc.asyncProperty(readArgs, async (args) => {
          expectCoded('read', args, await attempt('read', args), READ_CODES);
        }),
        { numRuns: soak(150) },
      );
      expect(tally.get('read success') ?? 0).toBeGreaterThan(0);
      expect(tally.get('read EBADARGS') ?? 0).toBeGreaterThan(5);
      expect((tally.get('read ENOTFOUND') ?? 0) + (tally.get('read EDENIED') ?? 0)).toBeGreaterThan(5);
      await iso.expectUntouched();
    },
    soakTimeout(60_000),
  );

  it('the engine still serves ordinary calls afterwards', async () => {
    const r = await iso.engine.run('bash', { command: 'echo still fine' });
    expect(r).toMatchObject({ status: 'success', complete: true });
    expect(r.model).toContain('still fine');
  });
});
