/**
 * The bounds of a farm queue and the streams and consumer that enforce
 * them on the server. The first process to open a queue creates them with
 * its bounds; a later one adopts what the server has (its own options then
 * only matter for a queue it creates), so every worker renews its lease
 * against the ack wait the server actually applies.
 */
import type * as JetStream from '@nats-io/jetstream';
import { BadOptionError } from '../protocol/errors.js';
import type { QueueNames } from './subjects.js';

/** A queue's bounds; each has a default. */
export interface QueueBounds {
  /** Items queued and not yet completed, at most; one more submission is EQUEUEFULL. @default 10000 */
  readonly maxDepth?: number;
  /** A delivery's lease in milliseconds: not renewed for this long, the item goes to another worker. @default 30000 */
  readonly ackWaitMs?: number;
  /** Deliveries an item gets; when the last ends without a result the item is recorded `failed`. @default 3 */
  readonly maxAttempts?: number;
  /** How long a resubmission of an item is recognised and dropped, in milliseconds. @default 600000 (10 minutes) */
  readonly duplicateWindowMs?: number;
  /** How long recorded results (and withdrawal marks) are kept, in milliseconds. @default 604800000 (7 days) */
  readonly resultRetentionMs?: number;
}

/** Bounds with every value present. */
export type EffectiveBounds = Required<QueueBounds>;

/** The defaults of {@link QueueBounds}. */
export const DEFAULT_BOUNDS: EffectiveBounds = {
  maxDepth: 10_000,
  ackWaitMs: 30_000,
  maxAttempts: 3,
  duplicateWindowMs: 10 * 60_000,
  resultRetentionMs: 7 * 24 * 3_600_000,
};

/** Bounds filled with defaults; EBADOPTION for a value that is not a positive integer (or a window past the retention). */
export function resolveBounds(bounds: QueueBounds = {}): EffectiveBounds {
  const out = { ...DEFAULT_BOUNDS };
  for (const key of Object.keys(DEFAULT_BOUNDS) as (keyof EffectiveBounds)[]) {
    const v = bounds[key];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v <= 0) {
      throw new BadOptionError(`queue option ${key} must be a positive integer, not ${JSON.stringify(v)}`, {
        option: key,
      });
    }
    out[key] = v;
  }
  // JetStream refuses a duplicate window longer than the messages' age limit.
  if (out.duplicateWindowMs > out.resultRetentionMs) {
    throw new BadOptionError(
      `queue option duplicateWindowMs (${out.duplicateWindowMs}) must not exceed resultRetentionMs (${out.resultRetentionMs})`,
      { option: 'duplicateWindowMs' },
    );
  }
  return out;
}

const NS_PER_MS = 1_000_000;

type Js = typeof JetStream;

function isNotFound(js: Js, err: unknown): boolean {
  const code = err instanceof js.JetStreamApiError ? err.code : undefined;
  return code === js.JetStreamApiCodes.StreamNotFound || code === js.JetStreamApiCodes.ConsumerNotFound;
}

/** Reads a stream or consumer, creating it when absent; another process creating it meanwhile is read back. */
async function ensure<T>(js: Js, info: () => Promise<T>, add: () => Promise<T>): Promise<T> {
  try {
    return await info();
  } catch (err) {
    if (!isNotFound(js, err)) throw err;
  }
  try {
    return await add();
  } catch (err) {
    // Created by another process with other bounds: theirs stand.
    return await info().catch(() => Promise.reject(err));
  }
}

/** Makes sure queue `names` has its streams and consumer, and returns the bounds in force on the server. */
export async function ensureQueue(
  js: Js,
  jsm: JetStream.JetStreamManager,
  names: QueueNames,
  wanted: EffectiveBounds,
): Promise<EffectiveBounds> {
  const work = await ensure(
    js,
    () => jsm.streams.info(names.workStream),
    () =>
      jsm.streams.add({
        name: names.workStream,
        subjects: [names.allWork],
        // One message per item, gone once acknowledged; a full queue refuses the new item, never drops an old one.
        retention: js.RetentionPolicy.Workqueue,
        max_msgs: wanted.maxDepth,
        discard: js.DiscardPolicy.New,
        storage: js.StorageType.File,
        duplicate_window: wanted.duplicateWindowMs * NS_PER_MS,
      }),
  );
  const results = await ensure(
    js,
    () => jsm.streams.info(names.resultStream),
    () =>
      jsm.streams.add({
        name: names.resultStream,
        subjects: [...names.allResults],
        retention: js.RetentionPolicy.Limits,
        storage: js.StorageType.File,
        max_age: wanted.resultRetentionMs * NS_PER_MS,
        duplicate_window: wanted.duplicateWindowMs * NS_PER_MS,
      }),
  );
  const consumer = await ensure(
    js,
    () => jsm.consumers.info(names.workStream, names.consumer),
    () =>
      jsm.consumers.add(names.workStream, {
        durable_name: names.consumer,
        filter_subject: names.allWork,
        ack_policy: js.AckPolicy.Explicit,
        ack_wait: wanted.ackWaitMs * NS_PER_MS,
        // One delivery more than the attempts: the last is not run, it records the item as failed (queue.ts).
        max_deliver: wanted.maxAttempts + 1,
      }),
  );
  return {
    maxDepth: work.config.max_msgs,
    ackWaitMs: Math.round((consumer.config.ack_wait ?? wanted.ackWaitMs * NS_PER_MS) / NS_PER_MS),
    maxAttempts: (consumer.config.max_deliver ?? wanted.maxAttempts + 1) - 1,
    duplicateWindowMs: Math.round(work.config.duplicate_window / NS_PER_MS),
    resultRetentionMs: Math.round(results.config.max_age / NS_PER_MS),
  };
}
