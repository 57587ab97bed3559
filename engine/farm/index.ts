/** A farm queue: many hosts run one batch through NATS JetStream (docs/architecture.md, "Farm queue"). */
export { DEFAULT_BOUNDS, type EffectiveBounds, type QueueBounds } from './bounds.js';
export { Delivery, RENEWALS_PER_LEASE } from './lease.js';
export { FarmQueue, type FarmQueueOptions, type RecordedResult, type RecordOutcome } from './queue.js';
export { parseQueueUrl, QUEUE_ENV, type QueueAddress, queueFromEnv } from './queue-url.js';
export {
  type FarmCall,
  type FarmResult,
  type FarmStatus,
  MAX_CALL_BYTES,
  MAX_RESULT_BYTES,
  MAX_RESULT_MESSAGE,
} from './records.js';
export { MAX_ID_BYTES } from './subjects.js';
export { type FarmBatchOptions, runFarmBatch } from './submit.js';
export {
  deliveryCallId,
  FarmWorker,
  type FarmWorkerEngine,
  type FarmWorkerLoad,
  type FarmWorkerOptions,
  farmResultOf,
  outputUri,
} from './worker.js';
