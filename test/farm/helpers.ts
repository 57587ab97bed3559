/** What the farm suites share: queues on the run's server, each test its own, closed after it. */
import { afterEach } from 'vitest';
import { FarmQueue, type FarmQueueOptions } from '../../engine/farm/index.js';
import { type QueueService, uniqueQueueUrl } from '../support/queue.js';

/** Short leases, so a redelivery takes a second, not the default half a minute. */
export const FAST: FarmQueueOptions = { ackWaitMs: 1000, maxAttempts: 3 };

/**
 * Opens queues for the current test, all closed after it. `open(url?)`
 * opens another connection to the same queue when given its URL (another
 * worker), or a new queue.
 */
export function useQueues(queue: () => QueueService): (options?: FarmQueueOptions, url?: string) => Promise<FarmQueue> {
  const open: FarmQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  return async (options = FAST, url = uniqueQueueUrl(queue())) => {
    const q = await FarmQueue.open(url, options);
    open.push(q);
    return q;
  };
}

/** The URL a queue was opened with (for a second worker on it). */
export const urlOf = (q: FarmQueue): string => `nats://${q.address.server}/${q.address.name}`;

/** Every recorded result of `batchId`, as item id → worker. */
export async function recorded(q: FarmQueue, batchId: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const r of q.results(batchId)) {
    if (out.has(r.itemId)) throw new Error(`item ${r.itemId} recorded twice`);
    out.set(r.itemId, r.result.worker);
  }
  return out;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
