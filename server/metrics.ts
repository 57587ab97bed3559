/**
 * `GET /v1/metrics`: the engine's counters (engine/metrics.ts), the pool's
 * and the store's gauges and the process's default metrics, in the
 * Prometheus text format, rendered by prom-client. prom-client is imported
 * on the first scrape only: an engine that never serves metrics never loads
 * it (its counters are plain numbers, engine/metrics.ts).
 *
 * The store's blob count and bytes come from a walk of blobs/ (one shard
 * directory at a time, never the whole listing in memory), at most once per
 * 30 s ({@link storeWalk}): a scrape in between reports the last walk
 * (`sluice_store_walk_timestamp_seconds` says when it was).
 */
import type { Registry } from 'prom-client';
import type { Engine } from '../engine/engine.js';
import { DURATION_BUCKETS } from '../engine/metrics.js';
import { importOptional, OPTIONAL_DEPENDENCIES } from '../engine/protocol/optional-dependencies.js';
import { type StoreSize, StoreSizeCache } from './store-size.js';

/** Least time between two walks of the store for its blob gauges (tests set it to 0). @internal */
export const storeWalk = { intervalMs: 30_000 };

interface Custom {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  values: () => Array<{ value: number; labels?: Record<string, string | number>; metricName?: string }>;
}

/** The metrics of one engine. */
class EngineRegistry {
  private size: StoreSize | undefined;
  private readonly walks: StoreSizeCache;

  constructor(
    engine: Engine,
    readonly registry: Registry,
  ) {
    this.walks = new StoreSizeCache(engine.store);
  }

  /** Refreshes the store gauges if the last walk is old enough (scrapes at once share one walk). */
  async refreshStore(): Promise<void> {
    this.size = await this.walks.get(storeWalk.intervalMs);
  }

  storeSize(): StoreSize {
    return this.size ?? { blobs: 0, bytes: 0, at: 0 };
  }
}

const registries = new WeakMap<Engine, Promise<EngineRegistry>>();

function customMetrics(e: EngineRegistry, engine: Engine): Custom[] {
  const snap = () => engine.metricsSnapshot();
  return [
    {
      name: 'sluice_calls_started_total',
      help: 'Calls started, by tool.',
      type: 'counter',
      values: () => [...snap().counters.started].map(([tool, value]) => ({ value, labels: { tool } })),
    },
    {
      name: 'sluice_calls_ended_total',
      help: 'Calls ended, by tool and terminal status.',
      type: 'counter',
      values: () =>
        [...snap().counters.ended].flatMap(([tool, byStatus]) =>
          [...byStatus].map(([status, value]) => ({ value, labels: { tool, status } })),
        ),
    },
    {
      name: 'sluice_call_duration_seconds',
      help: 'Call durations from start to terminal result, by tool.',
      type: 'histogram',
      values: () =>
        [...snap().counters.durations].flatMap(
          ([tool, h]): ReturnType<Custom['values']> => [
            ...DURATION_BUCKETS.map((le, i) => ({
              metricName: 'sluice_call_duration_seconds_bucket',
              value: h.buckets[i] ?? 0,
              labels: { tool, le },
            })),
            { metricName: 'sluice_call_duration_seconds_bucket', value: h.count, labels: { tool, le: '+Inf' } },
            { metricName: 'sluice_call_duration_seconds_sum', value: h.sum, labels: { tool } },
            { metricName: 'sluice_call_duration_seconds_count', value: h.count, labels: { tool } },
          ],
        ),
    },
    {
      name: 'sluice_captured_bytes_total',
      help: 'Output bytes captured and published, by stream (single for single-output tools).',
      type: 'counter',
      values: () => [...snap().counters.bytes].map(([stream, value]) => ({ value, labels: { stream } })),
    },
    {
      name: 'sluice_credit_waits_total',
      help: "Times a call's bytes in flight reached its credit window, so its worker waited for the disk.",
      type: 'counter',
      values: () => [{ value: snap().counters.creditWaits }],
    },
    {
      name: 'sluice_queue_depth',
      help: 'Calls waiting for a slot under the concurrency bound.',
      type: 'gauge',
      values: () => [{ value: snap().pool.queued }],
    },
    {
      name: 'sluice_calls_running',
      help: 'Calls holding a slot (running, or handed to a thread that is starting).',
      type: 'gauge',
      values: () => [{ value: snap().pool.running }],
    },
    {
      name: 'sluice_threads',
      help: 'Live worker threads.',
      type: 'gauge',
      values: () => [{ value: snap().pool.threads }],
    },
    {
      name: 'sluice_threads_busy',
      help: 'Worker threads carrying at least one started call.',
      type: 'gauge',
      values: () => [{ value: snap().pool.busyThreads }],
    },
    {
      name: 'sluice_store_blobs',
      help: 'Blobs in the store, as of the last walk.',
      type: 'gauge',
      values: () => [{ value: e.storeSize().blobs }],
    },
    {
      name: 'sluice_store_bytes',
      help: 'Bytes of the blobs in the store, as of the last walk.',
      type: 'gauge',
      values: () => [{ value: e.storeSize().bytes }],
    },
    {
      name: 'sluice_store_walk_timestamp_seconds',
      help: 'When the store was last walked for sluice_store_blobs and sluice_store_bytes.',
      type: 'gauge',
      values: () => [{ value: e.storeSize().at / 1000 }],
    },
    {
      name: 'sluice_gc_runs_total',
      help: 'Garbage collections run by this engine (dry runs excluded).',
      type: 'counter',
      values: () => [{ value: snap().counters.gcRuns }],
    },
    {
      name: 'sluice_gc_freed_bytes_total',
      help: 'Bytes of the blobs garbage collections removed.',
      type: 'counter',
      values: () => [{ value: snap().counters.gcBytesFreed }],
    },
    {
      name: 'sluice_gc_removed_blobs_total',
      help: 'Blobs garbage collections removed.',
      type: 'counter',
      values: () => [{ value: snap().counters.gcBlobsRemoved }],
    },
  ];
}

async function registryFor(engine: Engine): Promise<EngineRegistry> {
  let p = registries.get(engine);
  if (!p) {
    p = (async () => {
      // An optional peer dependency: a server that is never scraped never needs it (EMISSINGDEP when missing).
      const mod = await importOptional<typeof import('prom-client') & { default?: typeof import('prom-client') }>(
        OPTIONAL_DEPENDENCIES.metrics,
      );
      const prom = mod.Registry ? mod : (mod.default as typeof import('prom-client'));
      const registry = new prom.Registry();
      prom.collectDefaultMetrics({ register: registry, prefix: 'sluice_' });
      const e = new EngineRegistry(engine, registry);
      for (const m of customMetrics(e, engine)) {
        // prom-client's registry formats any object with a name, a type and get(): these read the
        // engine's counters at scrape time instead of mirroring every update into prom-client.
        registry.registerMetric({
          name: m.name,
          help: m.help,
          type: m.type,
          get: async () => ({ name: m.name, help: m.help, type: m.type, values: m.values(), aggregator: 'sum' }),
        } as unknown as Parameters<Registry['registerMetric']>[0]);
      }
      return e;
    })();
    p.catch(() => registries.delete(engine));
    registries.set(engine, p);
  }
  return p;
}

/** The exposition of `engine`'s metrics: its content type and text. */
export async function renderMetrics(engine: Engine): Promise<{ contentType: string; text: string }> {
  const e = await registryFor(engine);
  await e.refreshStore();
  return { contentType: e.registry.contentType, text: await e.registry.metrics() };
}
