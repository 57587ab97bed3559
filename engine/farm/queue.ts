/**
 * A farm queue on NATS JetStream (docs/architecture.md, "Farm queue"): a
 * submitter puts a batch's calls in, workers on any host take them (a pull
 * asks for as many as a worker has free slots), each delivery under a
 * renewable lease, and each item gets exactly one
 * recorded result, fenced on the server, whatever dies or stalls. Results
 * are references into the shared store; a submitter that resumes reads them
 * back from the queue.
 */
import { hostname } from 'node:os';
import type * as JetStream from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Changes } from '../batch/changes.js';
import { ProtocolError, QueueFullError } from '../protocol/errors.js';
import { type EffectiveBounds, ensureQueue, type QueueBounds, resolveBounds } from './bounds.js';
import { Delivery } from './lease.js';
import { loadNats, type NatsClient } from './nats.js';
import { parseQueueUrl, type QueueAddress } from './queue-url.js';
import { decodeCall, decodeResult, encodeCall, encodeResult, type FarmCall, type FarmResult } from './records.js';
import { idToken, type QueueNames, queueNames } from './subjects.js';
import { WithdrawalWatch } from './withdrawals.js';

/** Options of {@link FarmQueue.open}: the queue's bounds (used when this process creates it) and who this process is. */
export interface FarmQueueOptions extends QueueBounds {
  /** This process's name in the results it records. @default `${hostname()}:${pid}` */
  readonly worker?: string;
}

/** What {@link FarmQueue.recordResult} did: recorded this result, or found one recorded first (which stands). */
export type RecordOutcome =
  | { readonly outcome: 'recorded'; readonly seq: number }
  | { readonly outcome: 'already-recorded'; readonly existing: FarmResult };

/** A recorded result as {@link FarmQueue.results} gives it. */
export interface RecordedResult {
  readonly itemId: string;
  readonly result: FarmResult;
  /** Its position in the result stream (increases in recording order). */
  readonly seq: number;
}

/** The shortest pull the client accepts, and the longest one take() makes before looking at its deadline again. */
const MIN_PULL_MS = 1000;
const MAX_PULL_MS = 30_000;

/** An open farm queue: one connection, used by a submitter, a worker, or both. */
export class FarmQueue {
  /** Where it is. */
  readonly address: QueueAddress;
  /** The bounds in force on the server (adopted when another process created the queue). */
  readonly bounds: EffectiveBounds;
  /** The name this process records results under. */
  readonly worker: string;
  readonly #client: NatsClient;
  readonly #nc: NatsConnection;
  readonly #js: JetStream.JetStreamClient;
  readonly #jsm: JetStream.JetStreamManager;
  readonly #names: QueueNames;
  readonly #consumer: JetStream.Consumer;
  /** Withdrawal is for good, so a batch seen withdrawn is never asked about again. */
  readonly #withdrawn = new Set<string>();
  /** Started by the first pull: a worker learns of withdrawals from it instead of a read per delivery. */
  #watch: Promise<WithdrawalWatch | undefined> | undefined;

  private constructor(parts: {
    address: QueueAddress;
    bounds: EffectiveBounds;
    worker: string;
    client: NatsClient;
    nc: NatsConnection;
    js: JetStream.JetStreamClient;
    jsm: JetStream.JetStreamManager;
    names: QueueNames;
    consumer: JetStream.Consumer;
  }) {
    this.address = parts.address;
    this.bounds = parts.bounds;
    this.worker = parts.worker;
    this.#client = parts.client;
    this.#nc = parts.nc;
    this.#js = parts.js;
    this.#jsm = parts.jsm;
    this.#names = parts.names;
    this.#consumer = parts.consumer;
  }

  /**
   * Connects to the queue at `url` (`nats://host:port/NAME`; EBADOPTION when
   * malformed), creating its streams and consumer when absent. EMISSINGDEP
   * when the NATS client packages are not installed.
   */
  static async open(url: string | QueueAddress, options: FarmQueueOptions = {}): Promise<FarmQueue> {
    const address = typeof url === 'string' ? parseQueueUrl(url) : url;
    const wanted = resolveBounds(options);
    const client = await loadNats();
    const nc = await client.transport.connect({
      servers: address.server,
      ...(address.user === undefined ? {} : { user: address.user }),
      ...(address.pass === undefined ? {} : { pass: address.pass }),
      name: `sluice ${options.worker ?? defaultWorker()}`,
      // A queue server restarting is an interruption, not the end: keep trying, quickly.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    try {
      const jsm = await client.jetstream.jetstreamManager(nc);
      const names = queueNames(address.name);
      const bounds = await ensureQueue(client.jetstream, jsm, names, wanted);
      const js = client.jetstream.jetstream(nc);
      const consumer = await js.consumers.get(names.workStream, names.consumer);
      const worker = options.worker ?? defaultWorker();
      return new FarmQueue({ address, bounds, worker, client, nc, js, jsm, names, consumer });
    } catch (err) {
      await nc.close();
      throw err;
    }
  }

  /**
   * Queues `call` as item `itemId` of batch `batchId`. A resubmission of the
   * same item within the duplicate window is dropped (`duplicate: true`).
   * EQUEUEFULL (retryable) when the queue is at maxDepth; ERESOURCELIMIT for
   * a call over MAX_CALL_BYTES; EBADARGS for an empty or oversized id.
   */
  async submit(batchId: string, itemId: string, call: FarmCall): Promise<{ seq: number; duplicate: boolean }> {
    const subject = this.#names.work(batchId, itemId);
    const data = encodeCall(call);
    try {
      const ack = await this.#request(() =>
        this.#js.publish(subject, data, { msgID: `${idToken('batch', batchId)}.${idToken('item', itemId)}` }),
      );
      return { seq: ack.seq, duplicate: ack.duplicate };
    } catch (err) {
      if (this.#apiCode(err) === MAX_MSGS_EXCEEDED) {
        throw new QueueFullError(
          `queue ${this.address.display} holds its bound of ${this.bounds.maxDepth} items; submit again once workers have taken some`,
          { maxDepth: this.bounds.maxDepth, batchId, itemId },
          { cause: err },
        );
      }
      throw err;
    }
  }

  /** Items queued and not yet completed (delivered ones included). */
  async depth(): Promise<number> {
    return (await this.#request(() => this.#jsm.streams.info(this.#names.workStream))).state.messages;
  }

  /**
   * The next item for this worker, or null when none came within
   * `timeoutMs`. Items already recorded (a worker that recorded and died
   * before its ack), of a withdrawn batch, or past their attempts (recorded
   * here as `failed`, EWORKERCRASH) are settled on the way and not returned.
   * `timeoutMs` defaults to 1000, the shortest pull the client makes.
   */
  async take(options: { timeoutMs?: number } = {}): Promise<Delivery | null> {
    const deadline = Date.now() + (options.timeoutMs ?? MIN_PULL_MS);
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) return null;
      for await (const delivery of this.pull(1, { timeoutMs: left })) return delivery;
    }
  }

  /**
   * One pull of up to `max` items: yields each delivery as soon as it is
   * admitted (the items of a pull are admitted at once, not one after the
   * other), and ends once `max` items came or `timeoutMs` (clamped to
   * 1-30 s) passed. Items are settled on the way as by {@link take}, so
   * fewer than the items that came may be yielded. On an error, deliveries
   * admitted and not yet yielded are handed back.
   */
  async *pull(max: number, options: { timeoutMs?: number } = {}): AsyncGenerator<Delivery, void, undefined> {
    const expires = Math.min(MAX_PULL_MS, Math.max(MIN_PULL_MS, options.timeoutMs ?? MIN_PULL_MS));
    await this.#watching();
    const messages = await this.#request(() =>
      this.#consumer.fetch({ max_messages: Math.max(1, Math.floor(max)), expires }),
    );
    const ready: Delivery[] = [];
    const changes = new Changes();
    let admitting = 0;
    let fetching = true;
    let failure: unknown;
    const fail = (err: unknown) => {
      failure ??= err;
    };
    void (async () => {
      try {
        for await (const msg of messages) {
          admitting++;
          this.#admit(msg)
            .then((d) => void (d && ready.push(d)), fail)
            .finally(() => {
              admitting--;
              changes.signal();
            });
        }
      } catch (err) {
        fail(err);
      } finally {
        fetching = false;
        changes.signal();
      }
    })();
    try {
      for (;;) {
        if (failure !== undefined) throw failure;
        const d = ready.shift();
        if (d) yield d;
        else if (!fetching && admitting === 0) return;
        else await changes.next();
      }
    } finally {
      if (fetching) void messages.close();
      while (fetching || admitting > 0) await changes.next();
      for (const d of ready.splice(0)) d.release();
    }
  }

  /** Starts the withdrawal watch once; without it (it could not start) withdrawals are read per delivery. */
  #watching(): Promise<WithdrawalWatch | undefined> {
    this.#watch ??= WithdrawalWatch.start(this.#js, this.#names.resultStream, this.#names.allWithdrawn, (subject) =>
      this.#withdrawn.add(this.#names.parse(subject).batchId),
    ).catch(() => {
      this.#watch = undefined;
      return undefined;
    });
    return this.#watch;
  }

  async #admit(msg: JetStream.JsMsg): Promise<Delivery | null> {
    const { batchId, itemId } = this.#names.parse(msg.subject);
    const attempt = msg.info.deliveryCount;
    if (attempt > this.bounds.maxAttempts) {
      // The extra delivery the consumer allows: nobody finished the item in its attempts, so say so, once.
      await this.recordResult(batchId, itemId, {
        status: 'failed',
        worker: this.worker,
        attempts: this.bounds.maxAttempts,
        error: {
          code: 'EWORKERCRASH',
          message: `no worker finished item ${JSON.stringify(itemId)} within its ${this.bounds.maxAttempts} attempts (each ended or stalled past its lease)`,
        },
      });
      await settle(msg);
      return null;
    }
    const [recorded, withdrawn] = await Promise.all([this.result(batchId, itemId), this.isWithdrawn(batchId)]);
    if (recorded !== undefined || withdrawn) {
      await settle(msg);
      return null;
    }
    let call: FarmCall;
    try {
      call = decodeCall(msg.data, msg.subject);
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      await this.recordResult(batchId, itemId, {
        status: 'failed',
        worker: this.worker,
        attempts: attempt,
        error: { code: err.code, message: err.message },
      });
      await settle(msg);
      return null;
    }
    return new Delivery(msg, { batchId, itemId, call }, this.bounds);
  }

  /**
   * Records `result` as item `itemId`'s, unless one is recorded already:
   * the server accepts only the first (a publish expecting the item's
   * subject to be empty), so a worker that stalled past its lease and wakes
   * gets `already-recorded` with the result that stands.
   */
  async recordResult(batchId: string, itemId: string, result: FarmResult): Promise<RecordOutcome> {
    const subject = this.#names.result(batchId, itemId);
    const data = encodeResult(result);
    try {
      const ack = await this.#request(() =>
        this.#js.publish(subject, data, {
          // The same worker's retry of the same attempt is recognised as that one, not refused.
          msgID: `${subject}.${result.worker}.${result.attempts}`,
          expect: { lastSubjectSequence: 0 },
        }),
      );
      return { outcome: 'recorded', seq: ack.seq };
    } catch (err) {
      if (this.#apiCode(err) !== this.#client.jetstream.JetStreamApiCodes.StreamWrongLastSequence) throw err;
      const existing = await this.result(batchId, itemId);
      if (existing === undefined) {
        throw new ProtocolError(`the server refused a second result for item ${JSON.stringify(itemId)} but has none`, {
          batchId,
          itemId,
        });
      }
      return { outcome: 'already-recorded', existing };
    }
  }

  /** Item `itemId`'s recorded result, or undefined when it has none. */
  async result(batchId: string, itemId: string): Promise<FarmResult | undefined> {
    const subject = this.#names.result(batchId, itemId);
    const stored = await this.#request(() =>
      this.#jsm.streams.getMessage(this.#names.resultStream, { last_by_subj: subject }),
    );
    return stored === null ? undefined : decodeResult(stored.data, subject);
  }

  /**
   * Batch `batchId`'s recorded results in recording order: those recorded
   * so far, then (with `follow`) each new one as it is recorded, until
   * `signal` aborts. One at a time: nothing holds the whole batch.
   */
  async *results(
    batchId: string,
    options: { follow?: boolean; signal?: AbortSignal } = {},
  ): AsyncGenerator<RecordedResult, void, undefined> {
    const { follow = false, signal } = options;
    const consumer = await this.#js.consumers.get(this.#names.resultStream, {
      filter_subjects: this.#names.batchResults(batchId),
    });
    if (!follow && (await consumer.info()).num_pending === 0) return;
    if (signal?.aborted) return;
    const messages = await consumer.consume();
    const stop = () => void messages.close();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      for await (const m of messages) {
        yield { itemId: this.#names.parse(m.subject).itemId, result: decodeResult(m.data, m.subject), seq: m.seq };
        if (!follow && m.info.pending === 0) return;
      }
    } finally {
      signal?.removeEventListener('abort', stop);
      await messages.close();
    }
  }

  /**
   * Withdraws batch `batchId` for good: a mark in the result stream, so a
   * worker that takes one of its items settles it without running it (a
   * call already running is the worker's to cancel). The items are not
   * purged from the work stream: on nats-server 2.9.10 a purge filtered by
   * subject moves the work consumer past every message up to the stream's
   * last (measured), stranding the other batches' items; so a withdrawn
   * batch's items leave the queue as workers take them, each a round trip
   * and no call.
   */
  async withdraw(batchId: string): Promise<void> {
    await this.#request(() =>
      this.#js.publish(this.#names.withdrawn(batchId), new Uint8Array(0), { msgID: this.#names.withdrawn(batchId) }),
    );
    this.#withdrawn.add(batchId);
  }

  /** True when batch `batchId` was withdrawn: from the withdrawal watch while it is current, else read from the server. */
  async isWithdrawn(batchId: string): Promise<boolean> {
    if (this.#withdrawn.has(batchId)) return true;
    if ((await this.#watch)?.current) return false;
    const mark = await this.#request(() =>
      this.#jsm.streams.getMessage(this.#names.resultStream, { last_by_subj: this.#names.withdrawn(batchId) }),
    );
    if (mark !== null) this.#withdrawn.add(batchId);
    return mark !== null;
  }

  /** Closes the connection. Deliveries still held stop renewing; their items go to other workers after the lease. */
  async close(): Promise<void> {
    await (await this.#watch)?.close().catch(() => {});
    if (!this.#nc.isClosed()) await this.#nc.close();
  }

  /**
   * Runs one request to the server, again when it timed out or found no
   * JetStream: a server restarting drops a request sent while the client
   * reconnects (measured: the first after a restart, now and then). Every
   * request made through here is idempotent: reads, and publishes with a
   * msgID (a retry of one that landed is recognised as a duplicate).
   */
  async #request<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        const transient = err instanceof Error && TRANSIENT.has(err.name);
        if (!transient || attempt >= REQUEST_ATTEMPTS || this.#nc.isClosed()) throw err;
      }
    }
  }

  #apiCode(err: unknown): number | undefined {
    return err instanceof this.#client.jetstream.JetStreamApiError ? err.code : undefined;
  }
}

/** The client's errors for a request that got no answer: nats-core's timeout, and no responders on the JetStream API. */
const TRANSIENT = new Set(['TimeoutError', 'JetStreamNotEnabled']);

/** Tries of one request to the server (each bounded by the client's request timeout, 5 s). */
const REQUEST_ATTEMPTS = 3;

/** JetStream's error code for a publish past a stream's max_msgs with discard New. */
const MAX_MSGS_EXCEEDED = 10077;

/** Acknowledges an item take() does not hand out, waiting for the server so it is gone when take() returns. */
async function settle(msg: JetStream.JsMsg): Promise<void> {
  // Unconfirmed is harmless: the item comes back and is settled again, its result unchanged.
  await msg.ackAck().catch(() => false);
}

function defaultWorker(): string {
  return `${hostname()}:${process.pid}`;
}
