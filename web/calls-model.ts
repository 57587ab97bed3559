/**
 * Every call the page knows of, kept fresh from `GET /v1/events` (each
 * change's summary) after one `GET /v1/calls` (the state when the stream
 * opened). A summary replaces the one held only when its `version` is newer,
 * so the list and the stream can arrive in any order. After `lagged`, or a
 * dropped connection, the list is read again.
 */
import { getJson, readEvents, Unauthorized } from './api.js';
import { bytesOf, forgetOldest, MAX_CALLS_HELD } from './calls-bound.js';
import type { CallSummary } from './types.js';

/** The calls and who wants to hear of changes. */
export class CallsModel {
  /** Calls by id, in the order they were first seen. */
  readonly calls = new Map<string, CallSummary>();
  /** Tool names seen. */
  readonly tools = new Set<string>();
  private readonly listeners = new Set<() => void>();
  private readonly stop = new AbortController();
  private connected = false;
  private readonly stateListeners = new Set<(connected: boolean) => void>();
  /** Bytes of the calls forgotten past MAX_CALLS_HELD, so {@link totalBytes} never goes back. */
  private forgottenBytes = 0;

  /** Calls `fn` after changes (at most once per animation frame). */
  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Calls `fn` when the live connection opens or drops. */
  onConnection(fn: (connected: boolean) => void): void {
    this.stateListeners.add(fn);
    fn(this.connected);
  }

  /** Bytes captured over every call known (progress while running, the output once ended). */
  totalBytes(): number {
    let n = this.forgottenBytes;
    for (const c of this.calls.values()) n += bytesOf(c);
    return n;
  }

  /** Keeps `s` when it is newer than what is held. */
  upsert(s: CallSummary): void {
    const held = this.calls.get(s.callId);
    if (held && held.version >= s.version) return;
    this.calls.set(s.callId, s);
    this.tools.add(s.tool);
    if (!held && this.calls.size > MAX_CALLS_HELD) this.forgottenBytes += forgetOldest(this.calls, MAX_CALLS_HELD);
    this.changed();
  }

  /** Follows the server until {@link close}. */
  async run(): Promise<void> {
    while (!this.stop.signal.aborted) {
      try {
        await readEvents(
          '/v1/events',
          (e) => this.onEvent(e.event, e.data),
          this.stop.signal,
          () => {
            this.setConnected(true);
            void this.relist();
          },
        );
      } catch (err) {
        if (err instanceof Unauthorized) break;
      }
      this.setConnected(false);
      if (this.stop.signal.aborted) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** Stops following. */
  close(): void {
    this.stop.abort();
  }

  private onEvent(event: string, data: string): void {
    if (event === 'call') this.upsert((JSON.parse(data) as { call: CallSummary }).call);
    else if (event === 'lagged') void this.relist();
  }

  private async relist(): Promise<void> {
    try {
      const list = await getJson<{ calls: CallSummary[] }>('/v1/calls', this.stop.signal);
      for (const c of list.calls) this.upsert(c);
    } catch {
      // The stream's own failure handling reconnects.
    }
  }

  private pending = false;
  private changed(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      for (const fn of this.listeners) fn();
    });
  }

  private setConnected(c: boolean): void {
    this.connected = c;
    for (const fn of this.stateListeners) fn(c);
  }
}
