/**
 * `GET /v1/metrics`: the engine's counters, the pool's and the store's
 * gauges and the process's default metrics, rendered by prom-client, which
 * is imported on the first scrape only. The store's counts come from a walk
 * of blobs/ at most once per {@link storeWalk} interval; a scrape in between
 * reports the last walk (`sluice_store_walk_timestamp_seconds`).
 */
import type { Aggregator, LabelValues, Registry } from 'prom-client';
import type { Engine } from '../engine/engine.js';
import type { FarmWorkerLoad } from '../engine/farm/worker.js';
import { DURATION_BUCKETS, type MetricsSnapshot } from '../engine/metrics.js';
import type { PoolStats } from '../engine/pool/pool.js';
import { importOptional, OPTIONAL_DEPENDENCIES } from '../engine/protocol/optional-dependencies.js';
import { type StoreSize, StoreSizeCache } from './store-size.js';

/** Least time between two walks of the store for its blob gauges (tests set it to 0). @internal */
export const storeWalk = { intervalMs: 30_000 };

type Prom = typeof import('prom-client');

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

/** The farm worker each engine runs for, when it runs for one (`sluice worker --listen`). */
const farmWorkers = new WeakMap<Engine, () => FarmWorkerLoad>();

/**
 * Adds a farm worker's health and load to `engine`'s `/v1/metrics`
 * (`sluice_farm_*`). Call it before the first scrape: the registry is built
 * then.
 */
export function exposeFarmWorker(engine: Engine, load: () => FarmWorkerLoad): void {
  farmWorkers.set(engine, load);
}

/** prom-client's Counter and Gauge on one registry, their values read at scrape time (the collect callback). */
interface Metrics {
  counter<L extends string>(
    name: string,
    help: string,
    labelNames: L[],
    values: () => Array<[LabelValues<L>, number]>,
  ): void;
  gauge(name: string, help: string, value: () => number): void;
}

function metricsOn(prom: Prom, registry: Registry): Metrics {
  const registers = [registry];
  return {
    counter: (name, help, labelNames, values) =>
      void new prom.Counter({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          for (const [labels, value] of values()) this.inc(labels, value);
        },
      }),
    gauge: (name, help, value) =>
      void new prom.Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(value());
        },
      }),
  };
}

/**
 * Registers the engine's metrics on `registry`: each reads the engine's
 * counters at scrape time instead of mirroring every update into
 * prom-client, which the engine does not load.
 */
function registerEngineMetrics(prom: Prom, registry: Registry, e: EngineRegistry, engine: Engine): void {
  const m = metricsOn(prom, registry);
  const counts = () => engine.metricsSnapshot().counters;
  callCounters(m, counts);
  sandboxCounters(m, counts);
  durationHistogram(prom, registry, counts);
  captureCounters(m, counts);
  poolGauges(m, () => engine.metricsSnapshot().pool);
  storeGauges(m, () => e.storeSize());
  gcCounters(m, counts);
  const farm = farmWorkers.get(engine);
  if (farm) farmMetrics(m, farm);
}

function farmMetrics(m: Metrics, load: () => FarmWorkerLoad): void {
  m.gauge('sluice_farm_running', 'Farm items this worker runs now.', () => load().running);
  m.gauge('sluice_farm_draining', '1 once this worker drains (takes no more items), else 0.', () =>
    load().draining ? 1 : 0,
  );
  m.gauge(
    'sluice_farm_last_poll_timestamp_seconds',
    'When a pull from the queue last returned (0 before the first): stale means the queue is unreachable.',
    () => load().lastPollAt / 1000,
  );
  const total = (name: string, help: string, n: (l: FarmWorkerLoad) => number) =>
    m.counter(name, help, [], () => [[{}, n(load())]]);
  total('sluice_farm_taken_total', 'Farm deliveries this worker took.', (l) => l.taken);
  total('sluice_farm_completed_total', 'Farm results this worker recorded, whatever their status.', (l) => l.completed);
  total('sluice_farm_failed_total', 'Farm results this worker recorded whose status is not success.', (l) => l.failed);
  total(
    'sluice_farm_redelivered_total',
    "Farm deliveries this worker took that were not the item's first.",
    (l) => l.redelivered,
  );
  total(
    'sluice_farm_fenced_total',
    "Farm results this worker was refused because another worker's stood first.",
    (l) => l.fenced,
  );
  total(
    'sluice_farm_released_total',
    'Farm deliveries this worker handed back unfinished (a drain past its deadline).',
    (l) => l.released,
  );
}

type Counts = () => Readonly<MetricsSnapshot>;

function callCounters(m: Metrics, counts: Counts): void {
  m.counter('sluice_calls_started_total', 'Calls started, by tool.', ['tool'], () =>
    [...counts().started].map(([tool, n]) => [{ tool }, n]),
  );
  m.counter('sluice_calls_ended_total', 'Calls ended, by tool and terminal status.', ['tool', 'status'], () =>
    [...counts().ended].flatMap(([tool, byStatus]) =>
      [...byStatus].map(([status, n]): [LabelValues<'tool' | 'status'>, number] => [{ tool, status }, n]),
    ),
  );
}

function sandboxCounters(m: Metrics, counts: Counts): void {
  m.counter(
    'sluice_sandboxed_calls_total',
    'Calls ended, by the filesystem mode of the sandbox they ran under (off: unconfined).',
    ['sandbox'],
    () => [...counts().sandboxed].map(([sandbox, n]) => [{ sandbox }, n]),
  );
  m.counter(
    'sluice_sandbox_limit_kills_total',
    'Calls a sandbox limit ended (error ELIMIT), by limit.',
    ['limit'],
    () => [...counts().limitKills].map(([limit, n]) => [{ limit }, n]),
  );
}

function captureCounters(m: Metrics, counts: Counts): void {
  m.counter(
    'sluice_captured_bytes_total',
    'Output bytes captured and published, by stream (single for single-output tools).',
    ['stream'],
    () => [...counts().bytes].map(([stream, n]) => [{ stream }, n]),
  );
  m.counter(
    'sluice_credit_waits_total',
    "Times a call's bytes in flight reached its credit window, so its worker waited for the disk.",
    [],
    () => [[{}, counts().creditWaits]],
  );
}

function poolGauges(m: Metrics, pool: () => PoolStats): void {
  m.gauge('sluice_queue_depth', 'Calls waiting for a slot under the concurrency bound.', () => pool().queued);
  m.gauge(
    'sluice_calls_running',
    'Calls holding a slot (running, or handed to a thread that is starting).',
    () => pool().running,
  );
  m.gauge('sluice_threads', 'Live worker threads.', () => pool().threads);
  m.gauge('sluice_threads_busy', 'Worker threads carrying at least one started call.', () => pool().busyThreads);
}

function storeGauges(m: Metrics, size: () => StoreSize): void {
  m.gauge('sluice_store_blobs', 'Blobs in the store, as of the last walk.', () => size().blobs);
  m.gauge('sluice_store_bytes', 'Bytes of the blobs in the store, as of the last walk.', () => size().bytes);
  m.gauge(
    'sluice_store_walk_timestamp_seconds',
    'When the store was last walked for sluice_store_blobs and sluice_store_bytes.',
    () => size().at / 1000,
  );
}

function gcCounters(m: Metrics, counts: Counts): void {
  const total = (name: string, help: string, n: (c: Readonly<MetricsSnapshot>) => number) =>
    m.counter(name, help, [], () => [[{}, n(counts())]]);
  total('sluice_gc_runs_total', 'Garbage collections run by this engine (dry runs excluded).', (c) => c.gcRuns);
  total('sluice_gc_freed_bytes_total', 'Bytes of the blobs garbage collections removed.', (c) => c.gcBytesFreed);
  total('sluice_gc_removed_blobs_total', 'Blobs garbage collections removed.', (c) => c.gcBlobsRemoved);
}

/** One sample of the exposition as prom-client's registry writes it. */
interface Sample {
  metricName: string;
  labels: Record<string, string | number>;
  sharedLabels: Record<string, never>;
  value: number;
}

const NO_SHARED_LABELS: Record<string, never> = Object.freeze({});

/**
 * The call-duration histogram: a prom-client Histogram (its name, labels and
 * buckets validated as such) whose series are the engine's own counts.
 * prom-client's histogram counts only what `observe` feeds it, and the
 * engine counts from its open, before prom-client is loaded (at the first
 * scrape); it would also write `le` before `tool`. So the series the
 * registry writes (`getForPromString`, which prom-client's registry asks a
 * histogram for) are built from the engine's buckets at scrape time.
 */
function durationHistogram(prom: Prom, registry: Registry, counts: Counts): void {
  const name = 'sluice_call_duration_seconds';
  const help = 'Call durations from start to terminal result, by tool.';
  class EngineDurations extends prom.Histogram<'tool'> {
    async getForPromString(): Promise<{
      name: string;
      help: string;
      type: 'histogram';
      aggregator: Aggregator;
      values: Sample[];
    }> {
      return { name, help, type: 'histogram', aggregator: 'sum', values: durationSamples(counts()) };
    }
  }
  new EngineDurations({ name, help, labelNames: ['tool'], buckets: [...DURATION_BUCKETS], registers: [registry] });
}

/** Each tool's cumulative buckets, `+Inf`, sum and count (Prometheus `le` semantics). */
function durationSamples(counts: Readonly<MetricsSnapshot>): Sample[] {
  const sample = (suffix: string, labels: Sample['labels'], value: number): Sample => ({
    metricName: `sluice_call_duration_seconds_${suffix}`,
    labels,
    sharedLabels: NO_SHARED_LABELS,
    value,
  });
  return [...counts.durations].flatMap(([tool, h]) => [
    ...DURATION_BUCKETS.map((le, i) => sample('bucket', { tool, le }, h.buckets[i] ?? 0)),
    sample('bucket', { tool, le: '+Inf' }, h.count),
    sample('sum', { tool }, h.sum),
    sample('count', { tool }, h.count),
  ]);
}

async function registryFor(engine: Engine): Promise<EngineRegistry> {
  let p = registries.get(engine);
  if (!p) {
    p = (async () => {
      // An optional peer dependency: a server that is never scraped never needs it (EMISSINGDEP when missing).
      const mod = await importOptional<Prom & { default?: Prom }>(OPTIONAL_DEPENDENCIES.metrics);
      const prom = mod.Registry ? mod : (mod.default as Prom);
      const registry = new prom.Registry();
      prom.collectDefaultMetrics({ register: registry, prefix: 'sluice_' });
      const e = new EngineRegistry(engine, registry);
      registerEngineMetrics(prom, registry, e, engine);
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
