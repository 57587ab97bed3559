/**
 * The engine's counters, plain numbers on the hot path (no metrics library
 * there); `GET /v1/metrics` (server/metrics.ts) renders them. Label values
 * are bounded: registered tool names, declared stream names, four statuses,
 * three sandbox modes, five limit names.
 */
import { SANDBOX_LIMIT_NAMES, type SandboxFilesystem } from './protocol/sandbox.js';
import type { CallStatus, OutputRef, TerminalResult } from './result.js';

/** Upper bounds (seconds) of the call-duration histogram's buckets. */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** One tool's duration histogram. */
export interface DurationHistogram {
  /** Cumulative counts per bucket of {@link DURATION_BUCKETS} (Prometheus `le` semantics). */
  buckets: number[];
  count: number;
  sum: number;
}

/** What a scrape reads. */
export interface MetricsSnapshot {
  started: Map<string, number>;
  /** By tool, then status. */
  ended: Map<string, Map<CallStatus, number>>;
  durations: Map<string, DurationHistogram>;
  /** Bytes captured by stream name (`single` for single-output tools). */
  bytes: Map<string, number>;
  /** Ended calls by the filesystem mode of the sandbox they ran under (`off`: unconfined). */
  sandboxed: Map<SandboxFilesystem, number>;
  /** Calls ended by a sandbox limit (ELIMIT), by `details.limit`. */
  limitKills: Map<string, number>;
  creditWaits: number;
  gcRuns: number;
  gcBytesFreed: number;
  gcBlobsRemoved: number;
}

/** The engine's counters. */
export class EngineMetrics {
  private readonly s: MetricsSnapshot = {
    started: new Map(),
    ended: new Map(),
    durations: new Map(),
    bytes: new Map(),
    sandboxed: new Map(),
    limitKills: new Map(),
    creditWaits: 0,
    gcRuns: 0,
    gcBytesFreed: 0,
    gcBlobsRemoved: 0,
  };

  callStarted(tool: string): void {
    this.s.started.set(tool, (this.s.started.get(tool) ?? 0) + 1);
  }

  callEnded(r: TerminalResult): void {
    let byStatus = this.s.ended.get(r.tool);
    if (!byStatus) {
      byStatus = new Map();
      this.s.ended.set(r.tool, byStatus);
    }
    byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + 1);
    let h = this.s.durations.get(r.tool);
    if (!h) {
      h = { buckets: DURATION_BUCKETS.map(() => 0), count: 0, sum: 0 };
      this.s.durations.set(r.tool, h);
    }
    const seconds = r.durationMs / 1000;
    // An indexed loop: entries() would allocate an array per bucket.
    for (let i = 0; i < DURATION_BUCKETS.length; i++) {
      if (seconds <= (DURATION_BUCKETS[i] as number)) h.buckets[i] = (h.buckets[i] ?? 0) + 1;
    }
    h.count++;
    h.sum += seconds;
    for (const [stream, n] of streamBytes(r.output)) this.s.bytes.set(stream, (this.s.bytes.get(stream) ?? 0) + n);
    const mode = r.sandbox?.filesystem ?? 'off';
    this.s.sandboxed.set(mode, (this.s.sandboxed.get(mode) ?? 0) + 1);
    if (r.error?.code === 'ELIMIT') {
      const limit = limitName(r.error.details?.limit);
      this.s.limitKills.set(limit, (this.s.limitKills.get(limit) ?? 0) + 1);
    }
  }

  /** A call's bytes in flight reached its credit window: its worker waits for credit. */
  creditWait(): void {
    this.s.creditWaits++;
  }

  /** A garbage collection ran and freed `bytes` in `removed` blobs. */
  gcRan(bytes: number, removed: number): void {
    this.s.gcRuns++;
    this.s.gcBytesFreed += bytes;
    this.s.gcBlobsRemoved += removed;
  }

  /** The counters as they are now (live maps: read them, do not keep them). */
  snapshot(): Readonly<MetricsSnapshot> {
    return this.s;
  }
}

/** A label value from the known limit names only: anything else would make the label's values unbounded. */
function limitName(limit: unknown): string {
  return typeof limit === 'string' && (SANDBOX_LIMIT_NAMES as readonly string[]).includes(limit) ? limit : 'unknown';
}

function streamBytes(o: OutputRef | null): Array<[string, number]> {
  if (!o) return [];
  if (o.kind === 'streams') return o.streams.map((s) => [s.name, s.bytes]);
  return [[o.kind === 'page' ? 'page' : 'single', o.bytes]];
}
