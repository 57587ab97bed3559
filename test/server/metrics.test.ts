/**
 * GET /v1/metrics: the Prometheus text exposition, parsed by a Prometheus
 * text parser: calls started and ended by tool and status, the duration
 * histogram, bytes captured per stream, credit waits, queue depth, threads,
 * store blobs and bytes, GC runs and bytes freed, calls by sandbox mode and
 * limit kills; behind the bearer token.
 */
import { promises as fsp } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { storeWalk } from '../../server/metrics.js';
import { sandboxSupport } from '../../workers/sandbox/support.js';
import { cleanup, startTestServer } from './helpers.js';

interface Sample {
  labels?: Record<string, string>;
  value?: string;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}
interface Family {
  name: string;
  type: string;
  metrics: Sample[];
}
const parse = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => Family[];

afterEach(cleanup);
// Every scrape walks the store here; the server's default keeps a walk for 30 s.
const walkInterval = storeWalk.intervalMs;
beforeAll(() => {
  storeWalk.intervalMs = 0;
});
afterAll(() => {
  storeWalk.intervalMs = walkInterval;
});

/** The last scrape's text (for what the parser does not keep: see the histogram check). */
let lastText = '';

async function scrape(api: (p: string) => Promise<Response>): Promise<Map<string, Family>> {
  const res = await api('/v1/metrics');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  lastText = await res.text();
  // The parser throws on any line that is not valid exposition text.
  return new Map(parse(lastText).map((f) => [f.name, f]));
}

function value(f: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const fam = f.get(name);
  if (!fam) throw new Error(`no metric ${name}`);
  const m = fam.metrics.find((s) => Object.entries(labels).every(([k, v]) => s.labels?.[k] === v));
  if (!m) throw new Error(`no ${name} sample with ${JSON.stringify(labels)}`);
  return Number(m.value ?? m.count);
}

describe('GET /v1/metrics', () => {
  it('counts calls by tool and status, their durations, bytes per stream, credit waits, threads and the store', async () => {
    const { api, engine } = await startTestServer(['flood'], {}, { window: 64 * 1024 });
    const before = await scrape(api);
    expect(before.get('sluice_calls_started_total')?.metrics ?? []).toEqual([]);
    expect(value(before, 'sluice_queue_depth')).toBe(0);

    await engine.run('bash', { command: 'printf abc; printf de >&2' });
    await engine.run('bash', { command: 'exit 3' });
    // 4 MiB through a 64 KiB window: the window fills, the worker waits for credit.
    await engine.run('flood', { bytes: 4 * 1024 * 1024 });
    const f = await scrape(api);
    expect(value(f, 'sluice_calls_started_total', { tool: 'bash' })).toBe(2);
    expect(value(f, 'sluice_calls_ended_total', { tool: 'bash', status: 'success' })).toBe(1);
    expect(value(f, 'sluice_calls_ended_total', { tool: 'bash', status: 'failed' })).toBe(1);
    expect(value(f, 'sluice_calls_ended_total', { tool: 'flood', status: 'success' })).toBe(1);
    expect(f.get('sluice_call_duration_seconds')?.type).toBe('HISTOGRAM');
    // parse-prometheus-text-format folds a labelled histogram's series into one bucket map, so the
    // per-tool series are checked on the text itself.
    expect(lastText).toContain('sluice_call_duration_seconds_bucket{tool="bash",le="+Inf"} 2\n');
    expect(lastText).toContain('sluice_call_duration_seconds_count{tool="bash"} 2\n');
    expect(lastText).toContain('sluice_call_duration_seconds_count{tool="flood"} 1\n');
    const sum = /sluice_call_duration_seconds_sum\{tool="bash"\} ([0-9.e-]+)\n/.exec(lastText);
    expect(Number(sum?.[1])).toBeGreaterThan(0);
    const buckets = [
      ...lastText.matchAll(/sluice_call_duration_seconds_bucket\{tool="bash",le="[^"]+"\} ([0-9]+)/g),
    ].map((m) => Number(m[1]));
    // Cumulative: never decreasing, ending at the count.
    expect(buckets).toEqual([...buckets].sort((a, b) => a - b));
    expect(buckets.at(-1)).toBe(2);
    expect(value(f, 'sluice_captured_bytes_total', { stream: 'stdout' })).toBe(3);
    expect(value(f, 'sluice_captured_bytes_total', { stream: 'stderr' })).toBe(2);
    expect(value(f, 'sluice_captured_bytes_total', { stream: 'single' })).toBe(4 * 1024 * 1024);
    expect(value(f, 'sluice_credit_waits_total')).toBeGreaterThanOrEqual(1);
    expect(value(f, 'sluice_threads')).toBeGreaterThanOrEqual(1);
    expect(value(f, 'sluice_threads_busy')).toBe(0);
    expect(value(f, 'sluice_calls_running')).toBe(0);
    // abc, de, the flood blob and the bash manifests are in the store.
    expect(value(f, 'sluice_store_blobs')).toBeGreaterThanOrEqual(4);
    expect(value(f, 'sluice_store_bytes')).toBeGreaterThanOrEqual(4 * 1024 * 1024 + 5);
    expect(f.get('sluice_process_resident_memory_bytes')).toBeDefined();
  });

  it('a running call shows in threads busy and calls running; queued calls in the queue depth', async () => {
    const { api, engine, dir } = await startTestServer([], {}, { concurrency: 1 });
    const release = `${dir}/release`;
    const started = `${dir}/started`;
    const first = engine.call('bash', {
      command: `touch ${started}; n=0; while [ ! -e ${release} ]; do n=$((n+1)); [ $n -gt 3000 ] && exit 7; sleep 0.02; done`,
    });
    const queued = engine.call('bash', { command: 'echo queued' });
    const { promises: fsp } = await import('node:fs');
    const until = Date.now() + 30_000;
    while (
      !(await fsp.stat(started).then(
        () => true,
        () => false,
      )) &&
      Date.now() < until
    ) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const f = await scrape(api);
    expect(value(f, 'sluice_calls_running')).toBe(1);
    expect(value(f, 'sluice_threads_busy')).toBe(1);
    expect(value(f, 'sluice_queue_depth')).toBe(1);
    await fsp.writeFile(release, '');
    expect((await first.result).status).toBe('success');
    expect((await queued.result).status).toBe('success');
  });

  it('counts GC runs and the bytes they freed', async () => {
    const { api, engine } = await startTestServer();
    const r = await engine.run('bash', { command: 'head -c 5000 /dev/zero' });
    expect(r.status).toBe('success');
    const report = await engine.gc({ graceMs: 0 });
    expect(report.removed).toBeGreaterThanOrEqual(1);
    const f = await scrape(api);
    expect(value(f, 'sluice_gc_runs_total')).toBe(1);
    expect(value(f, 'sluice_gc_freed_bytes_total')).toBe(report.bytesFreed);
    expect(value(f, 'sluice_gc_removed_blobs_total')).toBe(report.removed);
  });

  it('needs the bearer token (401 without it) and takes no query parameters (EBADARGS)', async () => {
    const { api } = await startTestServer();
    expect((await api('/v1/metrics', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const bad = await api('/v1/metrics?x=1');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('EBADARGS');
  });
});

describe.runIf(sandboxSupport().available)('GET /v1/metrics of sandboxed calls', () => {
  it('counts ended calls by sandbox mode and the calls a limit ended by limit', async () => {
    const { api, engine, dir } = await startTestServer([], {}, { sandbox: {} });
    expect((await engine.run('bash', { command: 'echo in' })).sandbox?.filesystem).toBe('workspace-write');
    const ro = await engine.run('bash', { command: 'echo ro' }, { sandbox: { filesystem: 'read-only' } });
    expect(ro.sandbox?.filesystem).toBe('read-only');
    // The shell's last command: a file-size kill there ends the call (docs/security.md).
    const big = await engine.run(
      'bash',
      { command: 'head -c 10M /dev/zero > f' },
      { sandbox: { limits: { fileSizeBytes: 1024 * 1024 } } },
    );
    expect(big.error).toMatchObject({ code: 'ELIMIT', details: { limit: 'fileSize' } });
    const f = await scrape(api);
    expect(value(f, 'sluice_sandboxed_calls_total', { sandbox: 'workspace-write' })).toBe(2);
    expect(value(f, 'sluice_sandboxed_calls_total', { sandbox: 'read-only' })).toBe(1);
    expect(f.get('sluice_sandboxed_calls_total')?.metrics.map((m) => m.labels?.sandbox)).not.toContain('off');
    expect(value(f, 'sluice_sandbox_limit_kills_total', { limit: 'fileSize' })).toBe(1);
    expect(f.get('sluice_sandbox_limit_kills_total')?.metrics).toHaveLength(1);
    // The kill stopped the write at the limit, and left nothing running.
    expect((await fsp.stat(join(dir, 'f'))).size).toBe(1024 * 1024);
    expect(value(f, 'sluice_calls_running')).toBe(0);

    const plain = await startTestServer();
    await plain.engine.run('bash', { command: 'true' });
    const g = await scrape(plain.api);
    expect(value(g, 'sluice_sandboxed_calls_total', { sandbox: 'off' })).toBe(1);
    expect(g.get('sluice_sandbox_limit_kills_total')?.metrics ?? []).toEqual([]);
  });
});
