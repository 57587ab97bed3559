/**
 * The S3 store (issue 23), against the S3 service of `SLUICE_TEST_S3_ENDPOINT`
 * (with the `AWS_*` variables), else a Ceph RGW this program starts with
 * `.ci/s3-up.sh` and stops at the end. Three targets, each a ratio measured
 * in this run:
 *
 * - publish: 256 MiB through sluice (streamed into a writer: local capture,
 *   hash, then the upload) vs the raw SDK's multipart upload of the same
 *   file, >= 0.8x the raw throughput;
 * - pages: the last page of a 1 GiB S3 artifact within 3x its first page
 *   (medians, from a second store, after its verifying first read);
 * - small calls: calls per second of one-line bash calls on an S3 store vs
 *   a directory store (the better of a run before and one after), >= 0.5x
 *   (issue 42: small blobs in pack objects), and
 *   the requests each costs (PUTs, GETs, HEADs per call), without and with a
 *   session, which must stay at what docs/store.md states.
 *
 * Without a service and without Ceph, prints why and passes nothing.
 *
 *   SLUICE_BENCH_S3_PUBLISH_BYTES (256 MiB), SLUICE_BENCH_S3_READ_BYTES (1 GiB),
 *   SLUICE_BENCH_S3_CALLS (200), SLUICE_BENCH_S3_RUNS (3)
 */

import { spawnSync } from 'node:child_process';
import { createReadStream, createWriteStream, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Engine } from '../engine/index.js';
import type { S3Bucket } from '../store/backend.js';
import { leaseTiming } from '../store/s3/lease.js';
import type { RequestCounts } from '../store/s3/objects.js';
import { Store } from '../store/store.js';
import { passes, type Target, target } from './targets.js';
import { envInt, generatedChunks, median, mibps, report, tempDir } from './util.js';

const PUBLISH_BYTES = envInt('SLUICE_BENCH_S3_PUBLISH_BYTES', 256 * 1024 * 1024);
const READ_BYTES = envInt('SLUICE_BENCH_S3_READ_BYTES', 1024 ** 3);
const CALLS = envInt('SLUICE_BENCH_S3_CALLS', 200);
const RUNS = envInt('SLUICE_BENCH_S3_RUNS', 3);
const CHUNK = 1024 * 1024;
const CI = fileURLToPath(new URL('../../.ci/', import.meta.url));

/** The service: the environment's, or one started here (with its stop function). */
function service(): { env: Record<string, string>; stop: () => void } | { reason: string } {
  if (process.env.SLUICE_TEST_S3_ENDPOINT) return { env: {}, stop: () => {} };
  const dir = join('/tmp', `sluice-bench-s3-${process.pid}`);
  const up = spawnSync(join(CI, 's3-up.sh'), [dir], { encoding: 'utf8' });
  if (up.status !== 0) return { reason: `.ci/s3-up.sh failed (${up.status}): ${up.stderr.trim().split('\n').pop()}` };
  const env: Record<string, string> = {};
  for (const m of up.stdout.matchAll(/^export (\w+)=(.*)$/gm)) env[m[1] as string] = m[2] as string;
  return { env, stop: () => spawnSync(join(CI, 's3-down.sh'), [dir], { stdio: 'ignore' }) };
}

function client(): S3Client {
  return new S3Client({
    endpoint: process.env.AWS_ENDPOINT_URL_S3,
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

async function deletePrefix(c: S3Client, bucket: string, prefix: string): Promise<void> {
  let token: string | undefined;
  do {
    const page = await c.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key as string }));
    if (keys.length > 0) await c.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
}

/** Line `i`, 20 to ~120 bytes, `salt` making every run's content (and digest) new. */
function line(i: number, salt: string): string {
  return `${salt} ${i} ${'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(3).slice(0, ((i * 2654435761) >>> 0) % 100)}\n`;
}

/** Writes generated lines to `path` until `bytes`, a chunk at a time. */
async function generate(path: string, bytes: number, salt: string): Promise<number> {
  const out = createWriteStream(path);
  let written = 0;
  for (const buf of generatedChunks((i) => line(i, salt), bytes, CHUNK)) {
    written += buf.length;
    if (!out.write(buf)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r) => out.end(() => r()));
  return written;
}

/** Streams the file at `path` into a new blob of `store`. */
async function publishFile(store: Store, path: string): Promise<{ digest: string; bytes: number }> {
  const w = store.writer();
  for await (const chunk of createReadStream(path, { highWaterMark: CHUNK })) await w.write(chunk as Buffer);
  return w.commit();
}

/** One part of the benchmark: its figures and its targets. */
type Part = Record<string, unknown> & { targets: Target[]; pass: boolean };

async function publishTarget(bucket: string, dir: string): Promise<Part> {
  const c = client();
  const sluice: number[] = [];
  const raw: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const path = join(dir, `publish-${run}`);
    await generate(path, PUBLISH_BYTES, `run${run}-${Date.now()}`);
    // Raw first, sluice second, alternating the files' page-cache state the same way each run.
    let t = performance.now();
    await new Upload({
      client: c,
      params: { Bucket: bucket, Key: `bench-raw/${run}`, Body: createReadStream(path, { highWaterMark: CHUNK }) },
      partSize: 16 * 1024 * 1024,
      queueSize: 4,
    }).done();
    raw.push(performance.now() - t);
    const store = await Store.open(`s3://${bucket}/bench-publish`, { localDir: join(dir, 'local-publish') });
    t = performance.now();
    await publishFile(store, path);
    sluice.push(performance.now() - t);
    await store.close();
    await fsp.rm(path);
    await deletePrefix(c, bucket, 'bench-raw/');
    await deletePrefix(c, bucket, 'bench-publish/');
  }
  c.destroy();
  const ratio = median(raw) / median(sluice);
  const targets = [
    target(
      's3.publish',
      "publish 256 MiB through sluice ≥ 0.8× the raw SDK's multipart upload of the same file",
      ratio,
      '>=',
      0.8,
      'x',
      2,
    ),
  ];
  return {
    bytes: PUBLISH_BYTES,
    sluiceMs: Math.round(median(sluice)),
    rawSdkMs: Math.round(median(raw)),
    sluiceMiBps: mibps(PUBLISH_BYTES, median(sluice)),
    rawSdkMiBps: mibps(PUBLISH_BYTES, median(raw)),
    ratio: Math.round(ratio * 100) / 100,
    targets,
    pass: passes(targets),
  };
}

async function pagesTarget(bucket: string, dir: string): Promise<Part> {
  const c = client();
  const path = join(dir, 'read');
  await generate(path, READ_BYTES, `read-${Date.now()}`);
  const a = await Store.open(`s3://${bucket}/bench-read`, { localDir: join(dir, 'local-a') });
  const blob = await publishFile(a, path);
  await a.close();
  await fsp.rm(path);
  // Without the read cache: the figure is about ranged GETs, not the local copy the cache would serve.
  const b = await Store.open(`s3://${bucket}/bench-read`, { localDir: join(dir, 'local-b'), s3CacheBytes: 0 });
  const uri = `artifact://${blob.digest}`;
  let t = performance.now();
  const head = await b.readPage(uri, { offset: 0, limit: 1 });
  const verifyMs = performance.now() - t;
  const last = Math.max(0, head.totalLines - 2000);
  const first: number[] = [];
  const lastMs: number[] = [];
  const requests = bucketOf(b).objects.requests;
  const before = { ...requests };
  for (let i = 0; i < 9; i++) {
    t = performance.now();
    await b.readPage(uri, { offset: 0, limit: 2000 });
    first.push(performance.now() - t);
    t = performance.now();
    await b.readPage(uri, { offset: last, limit: 2000 });
    lastMs.push(performance.now() - t);
  }
  const perPage = {
    gets: (requests.gets - before.gets) / 18,
    heads: (requests.heads - before.heads) / 18,
    getBytes: Math.round((requests.getBytes - before.getBytes) / 18),
  };
  await b.close();
  await deletePrefix(c, bucket, 'bench-read/');
  c.destroy();
  const ratio = median(lastMs) / median(first);
  const targets = [target('s3.pages', 'last page of a 1 GiB S3 artifact ≤ 3× its first page', ratio, '<=', 3, 'x', 2)];
  return {
    bytes: blob.bytes,
    lines: head.totalLines,
    firstReadVerifyMs: Math.round(verifyMs),
    firstPageMs: Math.round(median(first) * 10) / 10,
    lastPageMs: Math.round(median(lastMs) * 10) / 10,
    requestsPerPage: perPage,
    ratio: Math.round(ratio * 100) / 100,
    targets,
    pass: passes(targets),
  };
}

/** `n` one-line bash calls on `store`, one at a time; calls per second. */
async function calls(store: string, cwd: string, n: number): Promise<{ perSecond: number; engine: Engine }> {
  const engine = await Engine.open({ store, cwd });
  for (let i = 0; i < 10; i++) await engine.run('bash', { command: `echo warm ${i}` });
  const t = performance.now();
  for (let i = 0; i < n; i++) await engine.run('bash', { command: `echo call ${i}` });
  return { perSecond: n / ((performance.now() - t) / 1000), engine };
}

async function callsTarget(bucket: string, dir: string): Promise<Part> {
  const c = client();
  const local = await calls(join(dir, 'dir-store'), dir, CALLS);
  await local.engine.close();
  process.env.SLUICE_STORE_LOCAL = join(dir, 'local-calls');
  const s3 = await calls(`s3://${bucket}/bench-calls`, dir, CALLS);
  const r = bucketOf(s3.engine.store).objects.requests;
  const measure = async (command: string, session?: string) => {
    const before: RequestCounts = { ...r };
    const t = performance.now();
    for (let i = 0; i < CALLS; i++)
      await s3.engine.run('bash', { command: `${command} ${i}` }, session ? { session } : {});
    const ms = performance.now() - t;
    const perSecond = CALLS / (ms / 1000);
    const per = (k: keyof RequestCounts) => Math.round(((r[k] - before[k]) / CALLS) * 100) / 100;
    return {
      perSecond,
      // The lease is also rewritten every renew interval while it holds a pin (30 s by default), once
      // more when it empties, and once per 64 pack objects (the range it covers runs ahead by 64):
      // PUTs no one call causes, spread over the run's calls.
      leasePutsPerCall: (Math.ceil(ms / leaseTiming().renewMs) + 1 + Math.ceil(CALLS / 64)) / CALLS,
      perCall: {
        puts: per('puts'),
        gets: per('gets'),
        heads: per('heads'),
        lists: per('lists'),
        deletes: per('deletes'),
      },
    };
  };
  const { perSecond, perCall, leasePutsPerCall } = await measure('echo again');
  // Recorded in a session (docs/store.md, "Session records on S3"): a started and a completed batch object.
  await s3.engine.run('bash', { command: 'echo first' }, { session: 'bench' });
  const recorded = await measure('echo recorded', 'bench');
  await s3.engine.close();
  // The directory store again after the S3 runs, and the better of its two rates: a load spike on this
  // shared host during one directory run must not flatter the ratio.
  const localAfter = await calls(join(dir, 'dir-store-after'), dir, CALLS);
  await localAfter.engine.close();
  const directoryPerSecond = Math.max(local.perSecond, localAfter.perSecond);
  await deletePrefix(c, bucket, 'bench-calls/');
  c.destroy();
  // docs/store.md: a call's stdout, empty stderr and manifest go up in one pack object at the call's end
  // (1 PUT), under a lease that already covers that pack (no lease PUT, no tombstone HEAD); a session adds
  // its started and completed batch objects (2 PUT).
  const ratio = perSecond / directoryPerSecond;
  const targets = [
    target(
      's3.small-calls',
      'small calls on an S3 store ≥ 0.5× the directory store (calls/s, one at a time)',
      ratio,
      '>=',
      0.5,
      'x',
      2,
    ),
    target(
      's3.call-puts',
      "PUTs per call ≤ 1 (+ the run's lease writes per call)",
      perCall.puts,
      '<=',
      1 + leasePutsPerCall,
      'requests',
    ),
    target('s3.call-heads', 'HEADs per call = 0', perCall.heads, '<=', 0, 'requests'),
    target('s3.call-gets-lists', 'GETs + LISTs per call = 0', perCall.gets + perCall.lists, '<=', 0, 'requests'),
    target(
      's3.recorded-puts',
      "PUTs per call recorded in a session ≤ 3 (+ the run's lease writes per call)",
      recorded.perCall.puts,
      '<=',
      3 + recorded.leasePutsPerCall,
      'requests',
    ),
    target(
      's3.recorded-heads',
      'HEADs per call recorded in a session = 0',
      recorded.perCall.heads,
      '<=',
      0,
      'requests',
    ),
    target(
      's3.recorded-gets-lists',
      'GETs + LISTs per call recorded in a session = 0',
      recorded.perCall.gets + recorded.perCall.lists,
      '<=',
      0,
      'requests',
    ),
  ];
  return {
    calls: CALLS,
    directoryCallsPerSecond: Math.round(directoryPerSecond),
    directoryRunsCallsPerSecond: [Math.round(local.perSecond), Math.round(localAfter.perSecond)],
    s3CallsPerSecond: Math.round(perSecond),
    ratio: Math.round(ratio * 100) / 100,
    requestsPerCall: perCall,
    s3RecordedCallsPerSecond: Math.round(recorded.perSecond),
    requestsPerRecordedCall: recorded.perCall,
    targets,
    pass: passes(targets),
  };
}

const svc = service();
if ('reason' in svc) {
  report({ bench: 's3', skipped: `S3 benchmarks did not run: ${svc.reason}`, targets: [], pass: true });
} else {
  Object.assign(process.env, svc.env);
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const bucket = process.env.SLUICE_TEST_S3_BUCKET as string;
  const tmp = tempDir('sluice-bench-s3-');
  try {
    const publish = await publishTarget(bucket, tmp.dir);
    const pages = await pagesTarget(bucket, tmp.dir);
    const small = await callsTarget(bucket, tmp.dir);
    const parts = { publish, pages, smallCalls: small };
    const targets = Object.values(parts).flatMap((p) => p.targets);
    // Each part's figures under its name, its targets in the one list.
    const figures = Object.fromEntries(Object.entries(parts).map(([k, { targets: _, ...rest }]) => [k, rest]));
    report({ bench: 's3', ...figures, targets, pass: passes(targets) });
  } finally {
    tmp.remove();
    svc.stop();
  }
}

/** The bucket of the S3 store `store`. */
function bucketOf(store: Store): S3Bucket {
  const bucket = store.backend.bucket;
  if (!bucket) throw new Error(`${store.locator} is not an S3 store`);
  return bucket;
}
