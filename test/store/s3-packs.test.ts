/**
 * Small blobs of an S3 store in pack objects (store/s3/packs.ts), against a
 * real Ceph RGW: read byte-exact and by digest on another host with one
 * ranged GET, a call's outputs in one PUT, collection across two instances
 * (a pack goes only when nothing in it is referenced or leased), a publisher
 * killed mid-publish, and a damaged pack read as EINTEGRITY.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { Engine } from '../../engine/index.js';
import type { S3Backend } from '../../store/s3/backend.js';
import type { Store } from '../../store/store.js';
import { s3Service } from '../support/s3.js';
import { deletePrefix, hostEnv, s3Backend } from './backends.js';
import { sha256, tempDir } from './helpers.js';
import { bucketOf, keysUnder, SetRoots, twoHosts } from './s3-gc-helpers.js';

const s3 = await s3Service();
const STORE_JS = fileURLToPath(new URL('../../dist/store/store.js', import.meta.url));

const backendOf = (store: Store) => store.backend as unknown as S3Backend;
const packKeys = async (store: Store) => (await keysUnder(s3!, store, 'packs/')).sort();

async function objectBody(key: string): Promise<Buffer> {
  const got = await s3!.client.send(new GetObjectCommand({ Bucket: s3!.bucket, Key: key }));
  return Buffer.from(await (got.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
}

/** What `fn` cost in requests on `store`. */
async function cost<T>(store: Store, fn: () => Promise<T>) {
  const r = bucketOf(store).objects.requests;
  const before = { ...r };
  const result = await fn();
  return {
    result,
    spent: {
      puts: r.puts - before.puts,
      gets: r.gets - before.gets,
      heads: r.heads - before.heads,
      lists: r.lists - before.lists,
      getBytes: r.getBytes - before.getBytes,
    },
  };
}

describe.runIf(s3)('S3 packs of small blobs', () => {
  it('packs what is published together into one object, read byte-exact and by digest on another host', async () => {
    const [a, b] = await twoHosts(s3!);
    const texts = Array.from({ length: 20 }, (_, i) => `line ${i}\n`.repeat(i + 1));
    const pin = await a.pin();
    const infos = await Promise.all(texts.map((t) => a.publishBytes(t, undefined, pin)));
    await pin.release();
    for (const [i, info] of infos.entries()) expect(info.digest).toBe(sha256(texts[i] as string));
    const packs = await packKeys(a);
    // Group commit: the first publish goes alone, the others while it is in flight.
    expect(packs.length).toBeGreaterThanOrEqual(1);
    expect(packs.length).toBeLessThanOrEqual(3);
    expect(await keysUnder(s3!, a, 'blobs/')).toEqual([]);

    // Host B: one LIST and a GET per pack to find them, then each read one ranged GET of its record.
    const seven = infos[7]!;
    const first = await cost(b, () => b.readPage(`artifact://${seven.digest}`, { offset: 2, limit: 3 }));
    expect(first.result).toMatchObject({ content: 'line 7\n'.repeat(3), totalLines: 8, nextOffset: 5 });
    expect(first.spent).toMatchObject({ lists: 1, puts: 0 });
    const ten = infos[10]!;
    const again = await cost(b, async () => {
      const page = await b.readPage(`artifact://${ten.digest}`, { offset: 0, limit: 100 });
      return page.content;
    });
    expect(again.result).toBe(texts[10]);
    expect(again.spent).toEqual({ puts: 0, gets: 1, heads: 0, lists: 0, getBytes: 56 + ten.bytes });
    for (const [i, info] of infos.entries()) {
      expect((await b.readPage(`artifact://${info.digest}`, { offset: 0, limit: 1000 })).content).toBe(texts[i]);
    }
    expect(await b.hasBlob(infos[3]!.digest)).toBe(true);
    expect(await b.backend.totals()).toEqual({ blobs: 20, bytes: infos.reduce((n, i) => n + i.bytes, 0) });
  });

  it("a small call's streams and manifest go up in one pack PUT, with no HEAD or GET", async () => {
    const cwd = await tempDir();
    const prefix = `packs-engine-${process.pid}-${Date.now().toString(36)}`;
    const saved = process.env.SLUICE_STORE_LOCAL;
    process.env.SLUICE_STORE_LOCAL = join(cwd, 'local');
    const engine = await Engine.open({ store: `s3://${s3!.bucket}/${prefix}`, cwd });
    try {
      await engine.run('bash', { command: 'echo warm' });
      const { result, spent } = await cost(engine.store, async () => {
        const out = [];
        for (let i = 0; i < 5; i++) out.push(await engine.run('bash', { command: `echo call ${i}` }));
        return out;
      });
      expect(spent).toEqual({ puts: 5, gets: 0, heads: 0, lists: 0, getBytes: 0 });
      const last = result[4]!;
      expect(last.status).toBe('success');
      const manifest = last.output?.kind === 'streams' ? last.output.manifest : '';
      const other = await s3Backend(s3!).reopen(engine.store);
      expect((await other.readPage(`artifact://${manifest}/stdout`)).content).toBe('call 4\n');
    } finally {
      await engine.close();
      if (saved === undefined) delete process.env.SLUICE_STORE_LOCAL;
      else process.env.SLUICE_STORE_LOCAL = saved;
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    }
  });

  it('a collection on B keeps a leased pack and a referenced one, and deletes a pack nothing in it is referenced', async () => {
    const [a, b] = await twoHosts(s3!);
    const roots = new SetRoots();
    const pin = await a.pin();
    const kept = await a.publishBytes('referenced\n', undefined, pin);
    roots.record(kept.digest);
    await pin.release();
    const held = await a.pin();
    const gone = await a.publishBytes('unreferenced\n', undefined, held);
    expect(await packKeys(a)).toHaveLength(2);

    // A's lease covers its packs (and the pin on the second is still held): nothing goes.
    const leased = await b.backend.collect(roots.hooks(), { graceMs: 0 });
    expect(leased).toMatchObject({ packs: 2, packsRemoved: 0, removed: 0 });
    await held.release();
    await a.close();

    // A is gone: the pack holding only the unreferenced blob goes, the referenced one stays.
    const report = await b.backend.collect(roots.hooks(), { graceMs: 0 });
    expect(report).toMatchObject({ packs: 2, packsRemoved: 1, removed: 1 });
    expect(await packKeys(b)).toHaveLength(1);
    expect((await b.readPage(`artifact://${kept.digest}`)).content).toBe('referenced\n');
    await expect(b.readPage(`artifact://${gone.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(await b.verify()).toMatchObject({ corrupt: [], missing: [], packed: 1 });
  });

  it('a pack with one referenced blob is kept whole; a manifest in a pack keeps its streams', async () => {
    const [a, b] = await twoHosts(s3!);
    const roots = new SetRoots();
    const pin = await a.pin();
    // Deferred: all three go up in one pack object at the vouch, as a call's streams and manifest do.
    const live = await a.publishBytes('live stream\n', undefined, pin, true);
    const dead = await a.publishBytes('dead neighbour\n', undefined, pin, true);
    const { encodeManifest } = await import('../../store/manifest.js');
    const entries = [{ name: 'stdout', digest: live.digest, bytes: live.bytes, lines: live.lines }];
    const manifest = await a.publishBytes(encodeManifest(entries), undefined, pin, true);
    expect(await packKeys(a)).toEqual([]);
    await pin.vouch();
    expect(await packKeys(a)).toHaveLength(1);
    roots.record(manifest.digest);
    await pin.release();
    await a.close();
    const report = await b.backend.collect(roots.hooks(), { graceMs: 0 });
    expect(report).toMatchObject({ packs: 1, packsRemoved: 0 });
    expect((await b.readPage(`artifact://${manifest.digest}/stdout`)).content).toBe('live stream\n');
    expect((await b.readPage(`artifact://${dead.digest}`)).content).toBe('dead neighbour\n');
  });

  for (const step of ['pack-written', 'pack-synced'] as const) {
    it(`a publisher killed at ${step} leaves every publish it returned readable and the bucket clean`, async () => {
      const dir = await tempDir();
      const [probe] = await twoHosts(s3!);
      const script = `
        const { Store } = await import(${JSON.stringify(STORE_JS)});
        const store = await Store.open(${JSON.stringify(probe.locator)});
        const pin = await store.pin();
        for (let i = 0; ; i++) {
          const info = await store.publishBytes('crash test ' + i + '\\n', undefined, pin);
          process.stdout.write(info.digest + '\\n');
        }`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        env: {
          ...process.env,
          ...hostEnv(s3!, dir, 'crashing'),
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
          SLUICE_CRASH_AT: `${step}:3`,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString('utf8');
      });
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString('utf8');
      });
      const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_c, s) => resolve(s)));
      expect({ signal, err }).toEqual({ signal: 'SIGKILL', err: '' });
      const returned = out.trim().split('\n');
      expect(returned).toEqual([sha256('crash test 0\n'), sha256('crash test 1\n')]);
      for (const [i, d] of returned.entries()) {
        expect((await probe.readPage(`artifact://${d}`)).content).toBe(`crash test ${i}\n`);
      }
      // The third publish never returned: stored or not, nothing refers to it.
      expect(await probe.hasBlob(sha256('crash test 2\n'))).toBe(step === 'pack-synced');
      expect(await probe.verify()).toMatchObject({ corrupt: [], missing: [] });
    });
  }

  it('a damaged pack is EINTEGRITY on another host; verify reports it; publishing the content again heals reads', async () => {
    const [a, b] = await twoHosts(s3!);
    const info = await a.publishBytes('will be damaged\n');
    const [key] = await packKeys(a);
    const full = `${bucketOf(a).keyBase}${key}`;
    const body = await objectBody(full);
    const at = body.indexOf('will be damaged');
    body[at] = (body[at] ?? 0) ^ 1;
    await s3!.client.send(new PutObjectCommand({ Bucket: s3!.bucket, Key: full, Body: body }));
    await expect(b.readPage(`artifact://${info.digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    await expect(b.readPage(`artifact://${info.digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    expect(await b.verify()).toMatchObject({ corrupt: [info.digest], packed: 1 });

    // A damaged record header is as typed.
    const header = await objectBody(full);
    header[8] = (header[8] ?? 0) ^ 0xff;
    await s3!.client.send(new PutObjectCommand({ Bucket: s3!.bucket, Key: full, Body: header }));
    const c = await s3Backend(s3!).reopen(a);
    await expect(c.readPage(`artifact://${info.digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });

    const d = await s3Backend(s3!).reopen(a);
    await d.publishBytes('will be damaged\n');
    await d.close();
    expect((await b.readPage(`artifact://${info.digest}`)).content).toBe('will be damaged\n');
    expect(backendOf(b).packObjects.knownLocation(info.digest)?.key).not.toBe(full);
  });
  it('a deferred publish under a released pin is stored when it returns', async () => {
    const [a, b] = await twoHosts(s3!);
    const pin = await a.pin();
    await pin.release();
    // No vouch will come for a released pin: the publish itself must wait for the upload.
    const info = await a.publishBytes('after release\n', undefined, pin, true);
    expect((await packKeys(a)).length).toBe(1);
    expect((await b.readPage(`artifact://${info.digest}`)).content).toBe('after release\n');
  });

  it('a call whose deferred pack upload fails fails EDISK and references nothing', async () => {
    const cwd = await tempDir();
    const prefix = `packs-fail-${process.pid}-${Date.now().toString(36)}`;
    const saved = process.env.SLUICE_STORE_LOCAL;
    process.env.SLUICE_STORE_LOCAL = join(cwd, 'local');
    const engine = await Engine.open({ store: `s3://${s3!.bucket}/${prefix}`, cwd });
    try {
      const packs = backendOf(engine.store).packObjects;
      // The key of the call's pack is taken: its create-once PUT fails, after the call's streams were published.
      const taken = `${packs.prefix}${packs.owner}-${'0'.repeat(12)}.pack`;
      await s3!.client.send(new PutObjectCommand({ Bucket: s3!.bucket, Key: taken, Body: 'not a pack' }));
      const result = await engine.run('bash', { command: 'echo lost' });
      expect(result.status).not.toBe('success');
      expect(result.error?.code).toBe('EDISK');
      expect(result.output).toBeNull();
      // The next call takes the next key and goes through.
      const next = await engine.run('bash', { command: 'echo kept' });
      expect(next.status).toBe('success');
      const manifest = next.output?.kind === 'streams' ? next.output.manifest : '';
      expect((await engine.store.readPage(`artifact://${manifest}/stdout`)).content).toBe('kept\n');
    } finally {
      await engine.close();
      if (saved === undefined) delete process.env.SLUICE_STORE_LOCAL;
      else process.env.SLUICE_STORE_LOCAL = saved;
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    }
  });
});
