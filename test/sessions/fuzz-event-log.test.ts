/**
 * Session event logs, fuzzed: a real log written by the engine gets random
 * garbage lines inserted, lines replaced, bits flipped and a torn tail
 * appended. Reading never throws; it loads exactly the records whose lines
 * are untouched, in order, and counts every other non-empty line as corrupt
 * (the oracle: a line is intact iff it is byte-for-byte one of the lines the
 * engine wrote). Replay, GC (dry run) and verify run on the damaged log, and
 * the next writer appends a record that reads back, whatever the tail held.
 */
import { promises as fsp } from 'node:fs';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { MAX_LINE_BYTES, readEventLog } from '../../engine/sessions/log-reader.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { replaySession } from '../../engine/sessions/replay.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import { verifyWithSessions } from '../../engine/sessions/verify-references.js';
import { makeTempDir, removeDir, soak, soakTimeout } from '../support/invariants.js';
import { streamsResult } from './helpers.js';

let dir: string;
let engine: Engine;
/** The engine's log lines, without their `\n`. */
let lines: Buffer[];
let records: unknown[];
let serial = 0;

beforeAll(async () => {
  dir = await makeTempDir('sluice-fzlog-');
  engine = await Engine.open({ store: join(dir, 'store'), cwd: dir });
  const session = 'source';
  await engine.run('bash', { command: 'echo one; echo two >&2' }, { session });
  await engine.run('bash', { command: 'exit 4' }, { session });
  await engine.run('bash', { command: `echo "${'ü'.repeat(50)}"` }, { session });
  // Large arguments: the record is spilled to a blob and references it.
  await engine.run('bash', { command: `true ${'y'.repeat(70_000)}` }, { session });
  const first = await engine.run('bash', { command: 'echo reverted' }, { session });
  await engine.revert(session, first.callId);
  await engine.run('bash', { command: 'echo after revert' }, { session });
  const raw = await fsp.readFile(eventLogPath(engine.store.layout, session));
  lines = splitLines(raw);
  records = (await readEventLog(engine.store, session)).records;
  expect(records).toHaveLength(lines.length);
});

afterAll(async () => {
  await engine?.close();
  await removeDir(dir);
});

function splitLines(buf: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  for (let nl = buf.indexOf(0x0a); nl !== -1; nl = buf.indexOf(0x0a, start)) {
    out.push(buf.subarray(start, nl));
    start = nl + 1;
  }
  if (start < buf.length) out.push(buf.subarray(start));
  return out;
}

type Damage =
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'replace'; at: number; bytes: Uint8Array }
  | { kind: 'flip'; at: number; pos: number; bit: number }
  | { kind: 'empty'; at: number };

const garbage = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 200 }),
  // Plausible-looking frames: hex, a space and JSON that does not match the checksum.
  fc
    .tuple(fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 16, maxLength: 16 }), fc.jsonValue())
    .map(([h, j]) => Buffer.from(`${h} ${JSON.stringify(j)}`)),
  fc.constant(Buffer.from('{"type":"call.completed","callId":"forged"}')),
);
const damageArb: fc.Arbitrary<Damage> = fc.oneof(
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: garbage }),
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), bytes: garbage }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), pos: fc.nat(), bit: fc.nat({ max: 7 }) }),
  fc.record({ kind: fc.constant('empty' as const), at: fc.nat() }),
);

/** Applies the damage; returns the file bytes. `tail` is appended without a newline (a torn last write). */
function damaged(damage: readonly Damage[], tail: Uint8Array | undefined): Buffer {
  const out: Buffer[] = lines.map((l) => Buffer.from(l));
  for (const d of damage) {
    const at = d.at % (out.length + (d.kind === 'insert' ? 1 : 0));
    const noNewline = (b: Uint8Array) => Buffer.from(b.map((x) => (x === 0x0a ? 0x20 : x)));
    if (d.kind === 'insert') out.splice(at, 0, noNewline(d.bytes));
    else if (d.kind === 'empty') out.splice(at, 0, Buffer.alloc(0));
    else if (out.length === 0) continue;
    else if (d.kind === 'replace') out[at] = noNewline(d.bytes);
    else {
      const line = Buffer.from(out[at] as Buffer);
      if (line.length === 0) continue;
      const pos = d.pos % line.length;
      line[pos] = (line[pos] as number) ^ (1 << d.bit);
      out[at] = line;
    }
  }
  const body = Buffer.concat(out.map((l) => Buffer.concat([l, Buffer.from('\n')])));
  return tail ? Buffer.concat([body, Buffer.from(tail)]) : body;
}

/** The oracle: which original lines survive byte-for-byte, and how many other non-empty lines there are. */
function expectedOf(file: Buffer): { records: unknown[]; corrupt: number } {
  const originals = new Map(lines.map((l, i) => [l.toString('latin1'), i]));
  const kept: unknown[] = [];
  let corrupt = 0;
  for (const seg of splitLines(file)) {
    if (seg.length === 0) continue;
    const i = originals.get(seg.toString('latin1'));
    if (i === undefined || seg.length > MAX_LINE_BYTES) corrupt++;
    else kept.push(records[i]);
  }
  return { records: kept, corrupt };
}

async function plant(file: Buffer): Promise<string> {
  const id = `fz${serial++}`;
  const path = eventLogPath(engine.store.layout, id);
  await fsp.mkdir(dirname(path), { recursive: true });
  await fsp.writeFile(path, file);
  return id;
}

describe('damaged event logs (fast-check)', () => {
  it(
    'load exactly the untouched records, count the rest, and stay appendable',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(damageArb, { maxLength: 6 }),
          fc.option(fc.uint8Array({ minLength: 1, maxLength: 80 }), { nil: undefined }),
          async (damage, tail) => {
            const file = damaged(damage, tail);
            const want = expectedOf(file);
            const id = await plant(file);
            const got = await readEventLog(engine.store, id);
            expect(got.records).toEqual(want.records);
            expect(got.corrupt).toBe(want.corrupt);
            expect(got.unknown + got.invalid).toBe(0);
            const replayed = await replaySession(engine.store, id);
            expect(replayed.corruptLines).toBe(want.corrupt);

            // The next writer appends a record that reads back, even after a torn tail.
            const recorder = new SessionRecorder(engine.store);
            const extra = streamsResult(`appended-${id}`, id, records.length ? 'a'.repeat(64) : 'b'.repeat(64), []);
            await recorder.completed(extra);
            await recorder.close();
            const again = await readEventLog(engine.store, id);
            expect(again.records.slice(0, -1)).toEqual(want.records);
            expect(again.records.at(-1)).toMatchObject({ type: 'call.completed', callId: `appended-${id}` });
            expect(again.corrupt).toBe(want.corrupt);
          },
        ),
        { numRuns: soak(120) },
      );
      // Whole-store operations read every damaged log without failing.
      const gc = await collectGarbage(engine.store, { dryRun: true });
      expect(gc.removed).toBeGreaterThanOrEqual(0);
      const verify = await verifyWithSessions(engine.store);
      expect(verify.corruptLines).toBeGreaterThan(0);
    },
    soakTimeout(60_000),
  );

  it('a line over the 4 MiB bound is one corrupt line, read without holding it, and the lines around it load', async () => {
    const huge = Buffer.alloc(MAX_LINE_BYTES + 4096, 0x61);
    const file = Buffer.concat([
      lines[0] as Buffer,
      Buffer.from('\n'),
      huge,
      Buffer.from('\n'),
      lines[1] as Buffer,
      Buffer.from('\n'),
    ]);
    const id = await plant(file);
    const got = await readEventLog(engine.store, id);
    expect(got.corrupt).toBe(1);
    expect(got.records).toEqual([records[0], records[1]]);
  });
});
