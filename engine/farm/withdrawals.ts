/**
 * A worker's view of which batches are withdrawn, kept by watching the
 * marks (subjects.ts, `withdrawn`) instead of reading one per delivery: an
 * ordered consumer on the result stream, filtered to the marks, that reads
 * every mark kept (one per withdrawn batch, within the result retention)
 * and then each new one as it is published. A mark reaches the worker
 * within the server's push, so an item taken in that moment runs and is
 * cancelled by the worker's next look at its running batches (worker.ts),
 * as an item taken just before the withdrawal is; its one result is fenced
 * like any other.
 */
import type * as JetStream from '@nats-io/jetstream';

/** The running watch of a queue's withdrawal marks. */
export class WithdrawalWatch {
  readonly #messages: JetStream.ConsumerMessages;
  #current: boolean;
  #ended = false;
  readonly #done: Promise<void>;

  private constructor(messages: JetStream.ConsumerMessages, current: boolean, onMark: (subject: string) => void) {
    this.#messages = messages;
    this.#current = current;
    this.#done = this.#follow(onMark);
  }

  /**
   * Starts watching `subject` (a wildcard over the marks) in `stream`,
   * calling `onMark` with each mark's subject, those kept first.
   */
  static async start(
    js: JetStream.JetStreamClient,
    stream: string,
    subject: string,
    onMark: (subject: string) => void,
  ): Promise<WithdrawalWatch> {
    const consumer = await js.consumers.get(stream, { filter_subjects: subject });
    // The marks kept when the watch began: until they are read, a batch not seen withdrawn may still be.
    const kept = (await consumer.info()).num_pending;
    return new WithdrawalWatch(await consumer.consume(), kept === 0, onMark);
  }

  /** True once every mark kept when the watch began has been read, while the watch runs: a batch not seen withdrawn is not. */
  get current(): boolean {
    return this.#current && !this.#ended;
  }

  async #follow(onMark: (subject: string) => void): Promise<void> {
    try {
      for await (const m of this.#messages) {
        onMark(m.subject);
        if (m.info.pending === 0) this.#current = true;
      }
    } catch {
      // A watch that ended is not current: callers read the marks themselves again.
    } finally {
      this.#ended = true;
    }
  }

  /** Stops watching. */
  async close(): Promise<void> {
    await this.#messages.close();
    await this.#done;
  }
}
