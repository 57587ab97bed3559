/**
 * Model-based test of the store (fast-check commands): random sequences of
 * publish (small contents, many duplicates), session-recorded and pinned
 * manifests, bare and stream reads, pin, unpin, GC with grace 0, corruption
 * (a flipped bit, a truncation), a crash in the middle of a publish or of a
 * collection followed by a restart, and verify, must agree with the
 * in-memory model of store-model.ts: what is readable and what fails with
 * which code, what GC removes (never a pinned or rooted blob, nor a stream
 * of a kept manifest), that a crash never leaves a half-written blob, and
 * that the files a dead process left are reclaimed.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { encodeManifest } from '../../store/manifest.js';
import { streamsResult } from '../sessions/helpers.js';
import type { FaultyIO } from '../support/faulty-io.js';
import {
  blobDigests,
  expectNoLeftovers,
  makeTempDir,
  removeDir,
  sha256,
  soak,
  soakTimeout,
} from '../support/invariants.js';
import { heldPins } from './helpers.js';
import {
  crashAndRestart,
  expectedBareRead,
  expectedStreamRead,
  known,
  linesOf,
  type Model,
  modelKeep,
  modelPublish,
  newModel,
  observe,
  openReal,
  type Real,
} from './store-model.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

type Cmd = fc.AsyncCommand<Model, Real>;

/** The system is replaced on restart; commands reach it through this box. */
interface Box {
  real: Real;
  /** The I/O of every instance so far, for the descriptor leak check. */
  ios: FaultyIO[];
}
type BoxCmd = fc.AsyncCommand<Model, Box>;

const POOL = ['', 'a', 'a\n', 'one\ntwo\n', 'no final newline', 'ünï\n😀\n', `${'x'.repeat(3000)}\n`, 'a\r\nb\r\n'];
const contentArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...POOL) },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
);

function pick<T>(list: readonly T[], k: number): T | undefined {
  return list.length === 0 ? undefined : list[k % list.length];
}

class Publish implements BoxCmd {
  constructor(
    readonly text: string,
    readonly pinK: number | undefined,
  ) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const content = Buffer.from(this.text, 'utf8');
    const pinId = this.pinK === undefined ? undefined : pick([...m.pins.keys()], this.pinK);
    const info = await b.real.store.publishBytes(
      content,
      undefined,
      pinId === undefined ? undefined : b.real.pins.get(pinId),
    );
    const want = modelPublish(m, content);
    if (pinId !== undefined) m.pins.get(pinId)?.add(want.digest);
    expect(info).toEqual({
      digest: want.digest,
      bytes: content.length,
      lines: linesOf(content),
      deduplicated: want.deduplicated,
    });
  }
  toString = () => `publish(${JSON.stringify(this.text.slice(0, 20))}, pin ${this.pinK})`;
}

/** Two streams and their manifest, recorded as a live call of `session` (roots), the way the engine publishes. */
class PublishCall implements BoxCmd {
  constructor(
    readonly out: string,
    readonly err: string,
    readonly session: string,
  ) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const { store, recorder } = b.real;
    const pin = await store.pin();
    const entries = [];
    for (const [name, text] of [
      ['out', this.out],
      ['err', this.err],
    ] as const) {
      const info = await store.publishBytes(text, undefined, pin);
      modelPublish(m, Buffer.from(text, 'utf8'));
      entries.push({ name, digest: info.digest, bytes: info.bytes, lines: info.lines });
    }
    const body = encodeManifest(entries);
    const manifest = await store.publishBytes(body, undefined, pin);
    modelPublish(m, Buffer.from(body, 'utf8'));
    m.manifests.set(
      manifest.digest,
      entries.map((e) => ({ name: e.name, digest: e.digest })),
    );
    await recorder.completed(
      streamsResult(`c${m.contents.size}-${manifest.digest.slice(0, 8)}`, this.session, manifest.digest, entries),
    );
    await pin.release();
    for (const d of [manifest.digest, ...entries.map((e) => e.digest)]) m.roots.add(d);
  }
  toString = () =>
    `publishCall(${JSON.stringify(this.out.slice(0, 12))}, ${JSON.stringify(this.err.slice(0, 12))}, ${this.session})`;
}

/** Streams published unpinned, then their manifest under a new pin holding only the manifest: reachability alone keeps the streams. */
class PublishPinnedManifest implements BoxCmd {
  constructor(
    readonly a: string,
    readonly c: string,
  ) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const { store } = b.real;
    const entries = [];
    for (const [name, text] of [
      ['a', this.a],
      ['c', this.c],
    ] as const) {
      const info = await store.publishBytes(text);
      modelPublish(m, Buffer.from(text, 'utf8'));
      entries.push({ name, digest: info.digest, bytes: info.bytes, lines: info.lines });
    }
    const body = encodeManifest(entries);
    const pin = await store.pin();
    const manifest = await store.publishBytes(body, undefined, pin);
    modelPublish(m, Buffer.from(body, 'utf8'));
    m.manifests.set(
      manifest.digest,
      entries.map((e) => ({ name: e.name, digest: e.digest })),
    );
    const id = m.nextPin++;
    m.pins.set(id, new Set([manifest.digest]));
    b.real.pins.set(id, pin);
  }
  toString = () =>
    `publishPinnedManifest(${JSON.stringify(this.a.slice(0, 12))}, ${JSON.stringify(this.c.slice(0, 12))})`;
}

class Read implements BoxCmd {
  constructor(readonly k: number) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const digest = pick(known(m), this.k) as string;
    const want = expectedBareRead(m, digest);
    const got = await b.real.store.readPage(`artifact://${digest}`).catch((e: { code?: string }) => ({ code: e.code }));
    if ('code' in want) expect(got, `read ${digest}`).toEqual({ code: want.code });
    else
      expect(got, `read ${digest}`).toMatchObject({ content: want.content, totalLines: want.lines, nextOffset: null });
  }
  toString = () => `read(${this.k})`;
}

class ReadStream implements BoxCmd {
  constructor(
    readonly k: number,
    readonly s: number,
    readonly manifestsOnly: boolean,
  ) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const pool = this.manifestsOnly && m.manifests.size > 0 ? [...m.manifests.keys()] : known(m);
    const digest = pick(pool, this.k) as string;
    const names = ['out', 'err', 'a', 'c', 'nope'];
    const name = names[this.s % names.length] as string;
    const want = expectedStreamRead(m, digest, name);
    const uri = `artifact://${digest}/${name}`;
    const got = await b.real.store.readPage(uri).catch((e: { code?: string }) => ({ code: e.code }));
    if ('code' in want) expect(got, uri).toEqual({ code: want.code });
    else expect(got, uri).toMatchObject({ content: want.content, totalLines: want.lines, stream: name });
  }
  toString = () => `readStream(${this.k}, ${this.s}, ${this.manifestsOnly})`;
}

class PinCmd implements BoxCmd {
  constructor(readonly ks: number[]) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const digests = [...new Set(this.ks.map((k) => pick(known(m), k) as string))];
    const pin = await b.real.store.pin(digests);
    const id = m.nextPin++;
    m.pins.set(id, new Set(digests));
    b.real.pins.set(id, pin);
  }
  toString = () => `pin(${this.ks})`;
}

class Unpin implements BoxCmd {
  constructor(readonly k: number) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const id = pick([...m.pins.keys()], this.k);
    if (id === undefined) return;
    await b.real.pins.get(id)?.release();
    b.real.pins.delete(id);
    m.pins.delete(id);
  }
  toString = () => `unpin(${this.k})`;
}

class Gc implements BoxCmd {
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const keep = modelKeep(m);
    const removed = [...m.present.keys()].filter((d) => !keep.has(d));
    const report = await collectGarbage(b.real.store, { graceMs: 0 });
    for (const d of removed) m.present.delete(d);
    expect(report).toMatchObject({
      removed: removed.length,
      tmpReclaimed: m.deadTmp,
      pinsReclaimed: m.deadPins,
    });
    expect(report.trashRecovered).toBeGreaterThanOrEqual(0);
    m.deadTmp = 0;
    m.deadPins = 0;
    m.deadTrash = 0;
    expect(await blobDigests(b.real.store)).toEqual([...m.present.keys()].sort());
    // Only this instance's pin journal is left (kept open, empty when nothing is held); no temporary file at all.
    expect(await fsp.readdir(b.real.store.layout.tmp)).toEqual([]);
    expect((await fsp.readdir(b.real.store.layout.pins)).length).toBeLessThanOrEqual(1);
    if (m.pins.size === 0) expect(await heldPins(b.real.store.root)).toEqual([]);
  }
  toString = () => 'gc';
}

class Corrupt implements BoxCmd {
  constructor(
    readonly k: number,
    readonly at: number,
    readonly bit: number,
    readonly truncate: boolean,
  ) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const candidates = [...m.present].filter(([d, s]) => s === 'ok' && (m.contents.get(d)?.length ?? 0) > 0);
    const target = pick(candidates, this.k)?.[0];
    if (target === undefined) return;
    const path = b.real.store.layout.blobPath(target);
    const size = (m.contents.get(target) as Buffer).length;
    const st = await fsp.stat(path);
    if (this.truncate) {
      await fsp.truncate(path, this.at % size);
    } else {
      const fh = await fsp.open(path, 'r+');
      const one = Buffer.alloc(1);
      await fh.read(one, 0, 1, this.at % size);
      one[0] = (one[0] as number) ^ (1 << this.bit);
      await fh.write(one, 0, 1, this.at % size);
      await fh.close();
    }
    // A change through the filesystem moves the mtime; make sure of it whatever the timestamp granularity
    // (into the past, so the grace period is unaffected).
    const back = new Date(st.mtimeMs - 1000);
    await fsp.utimes(path, back, back);
    m.present.set(target, this.truncate ? 'truncated' : 'flipped');
  }
  toString = () => `corrupt(${this.k}, ${this.at}, ${this.bit}, ${this.truncate ? 'truncate' : 'flip'})`;
}

/** Dies at the n-th filesystem call of a publish (pinned or not), then restarts. */
class CrashPublish implements BoxCmd {
  constructor(
    readonly nth: number,
    readonly text: string,
    readonly pinned: boolean,
  ) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const content = Buffer.from(this.text, 'utf8');
    const digest = sha256(content);
    const before = m.present.get(digest);
    b.real.io.crashAt({ nth: this.nth });
    await (async () => {
      const pin = this.pinned ? await b.real.store.pin() : undefined;
      // Held by the dying instance (crashAndRestart closes its descriptor and leaves its file).
      if (pin) b.real.pins.set(-1, pin);
      await b.real.store.publishBytes(content, undefined, pin);
    })().catch(() => {});
    b.real = await crashAndRestart(m, b.real);
    b.ios.push(b.real.io);
    m.contents.set(digest, content);
    const after = await observe(b.real, digest, content);
    // Never a half-written blob: a blob that was not there is now absent or whole.
    if (before === undefined) expect(after === undefined || after === 'ok', `crash left ${after}`).toBe(true);
    // A blob that was there stays, as it was or healed by the publish it was replaced with.
    else expect(after === before || after === 'ok', `was ${before}, now ${after}`).toBe(true);
    if (after === undefined) m.present.delete(digest);
    else m.present.set(digest, after);
  }
  toString = () => `crashPublish(at op ${this.nth}, ${JSON.stringify(this.text.slice(0, 12))}, pinned ${this.pinned})`;
}

/** Dies at the n-th filesystem call of a collection (mid-sweep), restarts, and collects again. */
class CrashGc implements BoxCmd {
  constructor(readonly nth: number) {}
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const keep = modelKeep(m);
    b.real.io.crashAt({ nth: this.nth });
    // When the crash point is past its last operation, the collection completes (and reclaims what it may).
    const first = await collectGarbage(b.real.store, { graceMs: 0 }).catch(() => undefined);
    b.real = await crashAndRestart(m, b.real);
    b.ios.push(b.real.io);
    // Nothing the dead collection had to keep is lost: each is in place or among its tombstones.
    for (const d of keep) {
      if (!m.present.has(d)) continue;
      const inPlace = await fsp.stat(b.real.store.layout.blobPath(d)).then(
        () => true,
        () => false,
      );
      const tombs = await fsp.readdir(b.real.store.layout.trash).catch(() => [] as string[]);
      const tombstoned = (
        await Promise.all(
          tombs.map((t) =>
            fsp.stat(join(b.real.store.layout.trash, t, d)).then(
              () => true,
              () => false,
            ),
          ),
        )
      ).some(Boolean);
      expect(inPlace || tombstoned, `kept blob ${d} lost by a crashed collection`).toBe(true);
    }
    // The next collection restores the tombstones, then removes exactly what nothing holds (the pins died).
    const report = await collectGarbage(b.real.store, { graceMs: 0 });
    const stillKept = modelKeep(m, false);
    for (const d of [...m.present.keys()]) if (!stillKept.has(d)) m.present.delete(d);
    expect((first?.tmpReclaimed ?? 0) + report.tmpReclaimed).toBe(m.deadTmp);
    expect((first?.pinsReclaimed ?? 0) + report.pinsReclaimed).toBe(m.deadPins);
    expect(await fsp.readdir(b.real.store.layout.tmp)).toEqual([]);
    expect(await fsp.readdir(b.real.store.layout.pins)).toEqual([]);
    m.deadTmp = 0;
    m.deadPins = 0;
    m.deadTrash = 0;
    expect(await blobDigests(b.real.store)).toEqual([...m.present.keys()].sort());
    expect(await fsp.readdir(b.real.store.layout.trash).catch(() => [])).toEqual([]);
  }
  toString = () => `crashGc(at op ${this.nth})`;
}

class Verify implements BoxCmd {
  check = () => true;
  async run(m: Model, b: Box): Promise<void> {
    const report = await b.real.store.verify();
    const corrupt = [...m.present].filter(([, s]) => s !== 'ok').map(([d]) => d);
    const missing = new Set<string>();
    for (const [d, streams] of m.manifests) {
      if (m.present.get(d) !== 'ok') continue;
      for (const s of streams) if (!m.present.has(s.digest)) missing.add(s.digest);
    }
    expect(report).toMatchObject({
      scanned: m.present.size,
      corrupt: corrupt.sort(),
      missing: [...missing].sort(),
      unexpected: [],
    });
  }
  toString = () => 'verify';
}

const commands: fc.Arbitrary<BoxCmd>[] = [
  fc.tuple(contentArb, fc.option(fc.nat(), { nil: undefined })).map(([t, p]) => new Publish(t, p)),
  fc.tuple(contentArb, contentArb, fc.constantFrom('s1', 's2')).map(([o, e, s]) => new PublishCall(o, e, s)),
  fc.tuple(contentArb, contentArb).map(([a, c]) => new PublishPinnedManifest(a, c)),
  fc.nat().map((k) => new Read(k)),
  fc.tuple(fc.nat(), fc.nat(), fc.boolean()).map(([k, s, mo]) => new ReadStream(k, s, mo)),
  fc.array(fc.nat(), { minLength: 1, maxLength: 3 }).map((ks) => new PinCmd(ks)),
  fc.nat().map((k) => new Unpin(k)),
  fc.constant(new Gc()),
  fc.tuple(fc.nat(), fc.nat(), fc.nat({ max: 7 }), fc.boolean()).map(([k, at, bit, tr]) => new Corrupt(k, at, bit, tr)),
  fc.tuple(fc.integer({ min: 1, max: 12 }), contentArb, fc.boolean()).map(([n, t, p]) => new CrashPublish(n, t, p)),
  fc.integer({ min: 1, max: 8 }).map((n) => new CrashGc(n)),
  fc.constant(new Verify()),
];

describe('the store against its model (fast-check commands)', () => {
  it(
    'agrees with the model on reads, errors, GC, corruption, crashes and restarts',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.commands(commands, { maxCommands: 40 }), async (cmds) => {
          const tmp = await makeTempDir('sluice-model-');
          const real = await openReal(join(tmp, 'store'));
          const box: Box = { real, ios: [real.io] };
          try {
            await fc.asyncModelRun(async () => ({ model: newModel(), real: box }), cmds as Iterable<Cmd & BoxCmd>);
            // Whatever happened, once every pin is released and a collection ran, nothing is left over.
            for (const p of box.real.pins.values()) await p.release();
            await collectGarbage(box.real.store, { graceMs: 0 });
            await expectNoLeftovers(box.real.store);
            await box.real.recorder.close();
            await box.real.store.close();
            expect(await fsp.readdir(box.real.store.layout.pins)).toEqual([]);
            // No descriptor left open, by any instance, crashed or not.
            expect(box.ios.flatMap((io) => io.openHandles())).toEqual([]);
          } finally {
            await box.real.recorder.close().catch(() => {});
            await removeDir(tmp);
          }
        }),
        { numRuns: soak(30) },
      );
    },
    soakTimeout(60_000),
  );
});
