/**
 * Every filesystem fault at every step of a publication, through the real
 * engine: a dry run records the store operations of one call (bash's named
 * streams, a single-output tool, each fresh and deduplicated, in a new
 * session), then the call is repeated once per (operation, nth occurrence,
 * errno) with that one operation failing. Each must end in a typed EDISK
 * carrying the errno (a short write must simply succeed), with tmp/ and
 * pins/ empty, no blob whose content differs from its name, no manifest or
 * live session record pointing at a missing blob, and an engine that still
 * serves the next call. An fsync that fails is never success.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import type { TerminalResult } from '../../engine/result.js';
import { replaySession } from '../../engine/sessions/replay.js';
import { expectPublished, fixture } from '../support/engines.js';
import { FaultyIO, type IoOp, label, type OpRecord, type Role } from '../support/faulty-io.js';
import { expectNoHalfState, expectNoLeftovers, makeTempDir, removeDir, tag, within } from '../support/invariants.js';
import { heldPins } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

interface Scenario {
  name: string;
  tool: 'bash' | 'echo';
  args(t: string): unknown;
  /** Publish the same content first, so every publish of the call deduplicates. */
  dedup: boolean;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'named streams (bash)',
    tool: 'bash',
    args: (t) => ({ command: `printf 'out ${t}\\n'; printf 'err ${t}\\n' >&2` }),
    dedup: false,
  },
  {
    name: 'named streams (bash), deduplicated',
    tool: 'bash',
    args: (t) => ({ command: `printf 'out ${t}\\n'; printf 'err ${t}\\n' >&2` }),
    dedup: true,
  },
  { name: 'single output', tool: 'echo', args: (t) => ({ text: `single ${t}\n` }), dedup: false },
  { name: 'single output, deduplicated', tool: 'echo', args: (t) => ({ text: `single ${t}\n` }), dedup: true },
];

const ERRNOS_ALL = ['ENOSPC', 'EIO'];
const ERRNOS_PATH = ['EACCES'];
const PATH_OPS: readonly IoOp[] = ['open', 'mkdir', 'rename', 'unlink', 'utimes'];
const WRITE_OPS: readonly IoOp[] = ['write', 'writev'];

const dirs: string[] = [];
const engines: Engine[] = [];
afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
  for (const d of dirs.splice(0)) await removeDir(d);
});

async function openFaulty(): Promise<{ engine: Engine; io: FaultyIO; dir: string }> {
  const dir = await makeTempDir();
  dirs.push(dir);
  const storeDir = join(dir, 'store');
  const io = new FaultyIO(storeDir);
  const engine = await Engine.open({ store: storeDir, cwd: dir, io });
  engines.push(engine);
  await engine.register(fixture('echo'));
  return { engine, io, dir };
}

/** One injection: the n-th operation of a kind on a role (and rename target role) fails with errno. */
interface Injection {
  op: IoOp;
  role: Role;
  toRole: Role | undefined;
  nth: number;
  errno: string;
}

function describeInjection(i: Injection): string {
  return `${i.errno} at ${label(i)} #${i.nth}`;
}

/** The injections for a recorded call: each distinct step, each of its occurrences, each errno that fits it. */
function injectionsFor(ops: readonly OpRecord[]): Injection[] {
  const seen = new Map<string, number>();
  const out: Injection[] = [];
  for (const rec of ops) {
    // Releasing the pin (cutting the emptied journal) is not part of publishing: tested on its own below.
    if (rec.op === 'truncate' && rec.role === 'pin') continue;
    const key = label(rec);
    const nth = (seen.get(key) ?? 0) + 1;
    seen.set(key, nth);
    const errnos = [...ERRNOS_ALL];
    if (PATH_OPS.includes(rec.op)) errnos.push(...ERRNOS_PATH);
    if (WRITE_OPS.includes(rec.op)) errnos.push('short');
    for (const errno of errnos) out.push({ op: rec.op, role: rec.role, toRole: rec.toRole, nth, errno });
  }
  return out;
}

/** True when a failure of this step happens after the outputs are published (the terminal record's own I/O). */
function isRecordStep(i: Injection, ops: readonly OpRecord[]): boolean {
  if (i.role !== 'log') return false;
  // The first write to the log is the started record; later ones (and the datasync) are the terminal record.
  const logWrites = ops.filter((r) => r.role === 'log' && r.op === 'write');
  return i.op === 'datasync' || (i.op === 'write' && i.nth === logWrites.length && logWrites.length > 1);
}

/** True for a deduplicating publish's check of the existing blob (its open, and the refresh of its mtime). */
function isDedupCheckStep(i: Injection): boolean {
  return i.role === 'blob' && (i.op === 'open' || i.op === 'utimes');
}

async function expectConsistent(engine: Engine, r: TerminalResult, session: string, context: string): Promise<void> {
  await expectNoLeftovers(engine.store, context);
  await expectNoHalfState(engine.store, context);
  // Replay never throws; a call whose terminal record is in the log replays exactly as it was returned.
  const replayed = await replaySession(engine.store, session).catch((e: { code?: string }) => e);
  if (!('calls' in replayed)) {
    expect(replayed.code, context).toBe('ENOTFOUND');
    return;
  }
  const call = replayed.calls.find((c) => c.callId === r.callId);
  if (r.status === 'success') expect(call?.result, context).toEqual(r);
  else if (call && !call.interrupted) expect(call.result.output, context).toEqual(r.output);
}

describe('faults at every step of a publication', () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario.name}: each fault fails with EDISK (or is healed by a fresh copy) and leaves no half-state`, {
      timeout: 180_000,
    }, async () => {
      const { engine, io } = await openFaulty();
      const fixed = tag();
      // A first call publishes what a deduplicated scenario repeats, and opens the store's pin journal,
      // which stays open: the matrix covers a call on a warm store (the journal's open is tested below).
      const first = await engine.run(scenario.tool, scenario.args(fixed));
      expect(first.status).toBe('success');
      const argsFor = () => scenario.args(scenario.dedup ? fixed : tag());

      // Dry run: which operations does one call perform?
      io.clearLog();
      const dry = await engine.run(scenario.tool, argsFor(), { session: `dry-${tag()}` });
      expect(dry).toMatchObject({ status: 'success', complete: true });
      const ops = io.log.filter((r) => r.role !== 'other' && r.role !== 'reserve');
      // A new output is fsynced before it is placed; a deduplicated one writes no durable second copy.
      expect(ops.some((r) => r.op === 'fsync' && r.role === 'capture')).toBe(!scenario.dedup);
      expect(ops.some((r) => r.op === 'datasync' && r.role === 'log')).toBe(true);

      const injections = injectionsFor(ops);
      const problems: string[] = [];
      const firedSteps = new Set<string>();
      let fired = 0;
      for (const inj of injections) {
        const context = `${scenario.name}: ${describeInjection(inj)}`;
        const session = `s-${tag()}`;
        io.clearLog();
        const fault = io.inject({
          op: inj.op,
          role: inj.role,
          nth: inj.nth,
          errno: inj.errno,
          when: (rec) => rec.role === inj.role && rec.toRole === inj.toRole,
        });
        const r = await within(30_000, context, engine.run(scenario.tool, argsFor(), { session }));
        io.reset();
        try {
          if (fault.fired > 0 && isDedupCheckStep(inj)) {
            // The existing blob could not be checked or refreshed: the publisher's own good copy goes in its
            // place (as for a corrupt one), so the call succeeds.
            fired++;
            firedSteps.add(`${label(inj)} #${inj.nth}`);
            expect(r, context).toMatchObject({ status: 'success', complete: true });
            await expectPublished(engine, r.output);
          } else if (fault.fired === 0 || inj.errno === 'short') {
            // Not reached this time (a shard directory that already existed), or a short write: plain success.
            expect(r, context).toMatchObject({ status: 'success', complete: true });
            expect(r.error, context).toBeUndefined();
            await expectPublished(engine, r.output);
          } else {
            fired++;
            firedSteps.add(`${label(inj)} #${inj.nth}`);
            expect(r, context).toMatchObject({
              status: 'failed',
              complete: false,
              error: { code: 'EDISK', details: { errno: inj.errno } },
            });
            if (isRecordStep(inj, ops)) {
              // Outputs were published before the record failed: they stay valid (orphans until GC).
              await expectPublished(engine, r.output);
            } else if (r.output !== null && inj.role === 'capture') {
              // One stream's capture file failed, another's was kept: published, with fewer bytes than
              // were accepted, and the error saying what was.
              const accepted = (r.error?.details as { accepted?: Array<{ bytes: number }> } | undefined)?.accepted;
              const acceptedBytes = (accepted ?? []).reduce((n, a) => n + a.bytes, 0);
              const kept = r.output.kind === 'streams' ? r.output.streams.reduce((n, st) => n + st.bytes, 0) : -1;
              expect(kept, context).toBeGreaterThan(0);
              expect(kept, context).toBeLessThan(acceptedBytes);
              await expectPublished(engine, r.output);
            } else {
              expect(r.output, context).toBeNull();
            }
          }
          await expectConsistent(engine, r, session, context);
        } catch (err) {
          problems.push(
            `${context}: ${(err as Error).message.split('\n')[0]} ${JSON.stringify({ status: r.status, error: r.error })}`,
          );
        }
      }
      process.stdout.write(
        `${scenario.name}: ${injections.length} injections over ${ops.length} operations, ${fired} fired\n`,
      );
      expect(problems).toEqual([]);
      // The matrix was not vacuous: every step fired but those that happen only for a shard the store has
      // not published into yet (its mkdir, and the open of its directory, whose descriptor is then kept).
      const steps = new Set(injections.map((i) => `${label(i)} #${i.nth}`));
      const missed = [...steps].filter(
        (s) => !firedSteps.has(s) && !s.startsWith('mkdir') && !s.startsWith('open blob-dir'),
      );
      expect(missed).toEqual([]);
      expect(fired).toBeGreaterThan(10);
      // And the engine still serves calls.
      const after = await engine.run(scenario.tool, argsFor(), { session: `after-${tag()}` });
      expect(after).toMatchObject({ status: 'success', complete: true });
    });
  }
});

describe('fsync failures are never success', () => {
  it.each([
    ['fsync of a capture file', { op: 'fsync', role: 'capture' }],
    ['fsync of a blob directory after the rename', { op: 'fsync', role: 'blob-dir' }],
    ['fdatasync of the terminal record', { op: 'datasync', role: 'log', nth: 1 }],
    ['fsync of a new session directory', { op: 'fsyncDir', role: 'session-dir' }],
  ] as const)('%s fails the call with EDISK', async (_label, rule) => {
    const { engine, io } = await openFaulty();
    // The terminal record's datasync is the only one (the started record is not fsynced).
    const fault = io.inject({ ...rule, errno: 'EIO' });
    const r = await engine.run('bash', { command: `echo ${tag()}` }, { session: `fs-${tag()}` });
    io.reset();
    expect(fault.fired).toBe(1);
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EDISK', details: { errno: 'EIO' } } });
    expect(r.model).toContain('EDISK');
    await expectNoLeftovers(engine.store);
    await expectNoHalfState(engine.store);
  });
});

describe('a recording that fails', () => {
  it("replaces a failed call's status line with its own, never adding a second", async () => {
    const { engine, io } = await openFaulty();
    const fault = io.inject({ op: 'datasync', role: 'log', nth: 1, errno: 'EIO' });
    const r = await engine.run('bash', { command: `echo ${tag()}; exit 3` }, { session: `rf-${tag()}` });
    io.reset();
    expect(fault.fired).toBe(1);
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EDISK' } });
    const lines = r.model.split('\n').filter((l) => l.startsWith('[Status:'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[Status: failed\. EDISK: .*Output is incomplete\.\]$/);
    expect(r.model.endsWith(lines[0] as string)).toBe(true);
    await expectNoLeftovers(engine.store);
    await expectNoHalfState(engine.store);
  });
});

describe('the publication pin journal', () => {
  it('serial calls append to one journal that stays open: no pin file is created or deleted per call', async () => {
    // If it regresses: each call creates and deletes a pin file, and on ext4 every deleted inode slows the
    // creation of each blob near it for minutes (docs/benchmarks.md, "Inode churn").
    const { engine, io } = await openFaulty();
    await engine.run('bash', { command: `echo ${tag()}` }, { session: `pj-${tag()}` });
    io.clearLog();
    for (let i = 0; i < 5; i++) {
      const r = await engine.run('bash', { command: `echo ${tag()}` }, { session: `pj-${tag()}` });
      expect(r).toMatchObject({ status: 'success', complete: true });
    }
    const pinOps = io.log.filter((r) => r.role === 'pin');
    expect(pinOps.filter((r) => r.op === 'open' || r.op === 'unlink' || r.op === 'rename')).toEqual([]);
    // Each call: its adds appended, then the journal cut to zero once nothing is held.
    expect(pinOps.filter((r) => r.op === 'truncate')).toHaveLength(5);
    expect(pinOps.filter((r) => r.op === 'write').every((r) => r.text?.startsWith('+'))).toBe(true);
    const files = await fsp.readdir(engine.store.layout.pins);
    expect(files).toHaveLength(1);
    expect((await fsp.stat(join(engine.store.layout.pins, files[0] as string))).size).toBe(0);
    await expectNoLeftovers(engine.store);
    await engine.close();
    expect(await fsp.readdir(engine.store.layout.pins)).toEqual([]);
  });

  it('a journal that cannot be opened fails the call with EDISK, and the next call opens it', async () => {
    const { engine, io } = await openFaulty();
    const fault = io.inject({ op: 'open', role: 'pin', errno: 'EACCES' });
    const r = await engine.run('bash', { command: `echo ${tag()}` }, { session: `po-${tag()}` });
    io.reset();
    expect(fault.fired).toBe(1);
    expect(r).toMatchObject({
      status: 'failed',
      complete: false,
      error: { code: 'EDISK', details: { errno: 'EACCES' } },
    });
    expect(r.output).toBeNull();
    await expectNoLeftovers(engine.store);
    await expectNoHalfState(engine.store);
    const next = await engine.run('bash', { command: `echo ${tag()}` }, { session: `po-${tag()}` });
    expect(next).toMatchObject({ status: 'success', complete: true });
    await expectPublished(engine, next.output);
    await expectNoLeftovers(engine.store);
  });

  it('a journal that can be neither cut nor given its drops does not fail the call; the next release that empties it clears the stale holds', async () => {
    const { engine, io } = await openFaulty();
    const cut = io.inject({ op: 'truncate', role: 'pin', errno: 'EIO' });
    const drops = io.inject({
      op: 'write',
      role: 'pin',
      errno: 'EIO',
      when: (rec) => rec.text?.startsWith('-') === true,
    });
    const r = await engine.run('bash', { command: `echo ${tag()}` }, { session: `pin-${tag()}` });
    io.reset();
    expect([cut.fired, drops.fired]).toEqual([1, 1]);
    expect(r).toMatchObject({ status: 'success', complete: true });
    await expectPublished(engine, r.output);
    // Over-protection, never loss: the published blobs look pinned while the journal keeps their adds.
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const published = [r.output.manifest, ...r.output.streams.map((s) => s.digest)].sort();
    expect((await heldPins(engine.store.root)).sort()).toEqual(published);
    const next = await engine.run('bash', { command: `echo ${tag()}` }, { session: `pin-${tag()}` });
    expect(next.status).toBe('success');
    expect(await fsp.readdir(engine.store.layout.pins)).toHaveLength(1);
    expect(await heldPins(engine.store.root)).toEqual([]);
    await expectNoHalfState(engine.store);
  });
});

describe('a terminal record that could not be written', () => {
  it('torn by ENOSPC part-way: the call returns EDISK, and its replay shows that failure, not an interrupted call', async () => {
    // If it regresses: replay shows "interrupted: the process running it ended", though the process lived.
    const { engine, io } = await openFaulty();
    const session = `torn-${tag()}`;
    // Log writes: the started record, then the terminal record (half of it written, the rest refused).
    io.inject({ op: 'write', role: 'log', nth: 2, errno: 'short' });
    const refused = io.inject({ op: 'write', role: 'log', nth: 3, errno: 'ENOSPC' });
    const r = await engine.run('bash', { command: `echo ${tag()}` }, { session });
    io.reset();
    expect(refused.fired).toBe(1);
    expect(r).toMatchObject({
      status: 'failed',
      complete: false,
      error: { code: 'EDISK', details: { errno: 'ENOSPC' } },
    });
    const replayed = await replaySession(engine.store, session);
    expect(replayed.corruptLines).toBe(1);
    expect(replayed.calls).toHaveLength(1);
    expect(replayed.calls[0]?.interrupted).toBe(false);
    expect(replayed.calls[0]?.result).toEqual(r);
    await expectNoLeftovers(engine.store);
    await expectNoHalfState(engine.store, '', true);
  });
});
