/**
 * The throttle of a call's `progress` events: at most one per
 * {@link PROGRESS_INTERVAL_MS} while output flows, and one at the end of an
 * interval with a chunk in it, so the last counts before a silence are
 * never held back.
 */

/** Progress events go out at most this often while output flows. */
export const PROGRESS_INTERVAL_MS = 250;

export class ProgressTicker {
  private readonly publish: () => void;
  private readonly intervalMs: number;
  private at = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  /** `publish` sends one event with the counts of the moment it runs. */
  constructor(publish: () => void, intervalMs = PROGRESS_INTERVAL_MS) {
    this.publish = publish;
    this.intervalMs = intervalMs;
  }

  /** Output was accepted: publish now, or once the interval since the last event has passed. */
  note(): void {
    if (this.stopped || this.timer !== undefined) return;
    const wait = this.at + this.intervalMs - Date.now();
    if (wait <= 0) {
      this.fire();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.stopped) this.fire();
    }, wait);
  }

  /** The call ended: nothing more goes out. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private fire(): void {
    this.at = Date.now();
    this.publish();
  }
}
