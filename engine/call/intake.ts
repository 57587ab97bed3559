/** What a call takes in while it runs, each chunk's credit going back once on disk or dropped: every path returns it, failing ones included. */
import { ProtocolError, type SluiceError, toSluiceError } from '../protocol/errors.js';
import type { TextKind } from '../protocol/messages.js';
import type { Capture } from './capture.js';
import { freeChunk } from './free-buffer.js';
import type { FullTexts } from './full-text.js';
import type { PageCapture } from './page-capture.js';

/** What the intake needs of its call. */
export interface IntakeHost {
  /** True once the call has failed: chunks are dropped (their credit still goes back). */
  failed(): boolean;
  /** True once the call is stopping (failed or cancel requested): texts are dropped. */
  stopping(): boolean;
  fail(err: SluiceError): void;
  /** Sends `n` bytes of credit to the worker (when it is still there). */
  sendCredit(n: number): void;
  readonly window: number;
  /** The bytes in flight reached the window: the worker waits for credit (counted in engine/metrics.ts). */
  creditWait?(): void;
}

/** See the module comment. */
export class Intake {
  /** Largest number of bytes in flight (received, not yet on disk) seen; for tests of backpressure. */
  maxInFlight = 0;
  private inFlight = 0;
  private creditDue = 0;
  /** A send of the credit due is queued as a microtask. */
  private soon = false;
  private readonly capture: Capture | PageCapture;
  private readonly texts: FullTexts;
  private readonly host: IntakeHost;

  constructor(capture: Capture | PageCapture, texts: FullTexts, host: IntakeHost) {
    this.capture = capture;
    this.texts = texts;
    this.host = host;
  }

  chunk(index: number, bytes: Uint8Array): void {
    if (!(bytes instanceof Uint8Array)) {
      this.host.fail(new ProtocolError('a chunk without bytes'));
      return;
    }
    const len = bytes.length;
    if (this.host.failed()) {
      // Dropped, but its credit goes back: a writer blocked on credit wakes, sees the abort and ends by itself.
      this.credit(len);
      return;
    }
    let written: Promise<void>;
    try {
      written = this.capture.accept(index, bytes);
    } catch (err) {
      this.host.fail(toSluiceError(err, 'EPROTOCOL'));
      this.credit(len);
      return;
    }
    const before = this.inFlight;
    this.inFlight += len;
    if (this.inFlight > this.maxInFlight) this.maxInFlight = this.inFlight;
    if (before < this.host.window && this.inFlight >= this.host.window) this.host.creditWait?.();
    written.then(
      () => {
        this.inFlight -= len;
        this.credit(len);
        if (!this.capture.keepsChunks) freeChunk(bytes);
      },
      (err: unknown) => {
        this.inFlight -= len;
        this.host.fail(toSluiceError(err, 'EDISK'));
        // Not on disk and never will be, but no longer in flight either.
        this.credit(len);
      },
    );
  }

  /** Part of a whole text (a cut error message or display): written like a chunk, its credit back once on disk. */
  text(kind: TextKind, bytes: Uint8Array): void {
    if (!(bytes instanceof Uint8Array) || (kind !== 'error' && kind !== 'display')) {
      this.host.fail(new ProtocolError('a text message without bytes or of an unknown kind'));
      return;
    }
    const len = bytes.length;
    if (this.host.stopping()) {
      // Not kept, but its credit goes back so the sender is not stuck.
      this.credit(len);
      return;
    }
    let written: Promise<void>;
    try {
      written = this.texts.accept(kind, bytes);
    } catch (err) {
      this.host.fail(toSluiceError(err, 'EPROTOCOL'));
      this.credit(len);
      return;
    }
    // A failed write only loses the extra: the announced size no longer matches, so it is not published.
    written.then(
      () => this.credit(len),
      () => this.credit(len),
    );
  }

  /**
   * Returns credit, one message per batch of settled writes: a quarter
   * window at once (a writer may wait), less after the worker's posted
   * messages (`setImmediate`), so a call whose completion came with its output gets none.
   */
  credit(n: number): void {
    if (n <= 0) return;
    this.creditDue += n;
    if (this.creditDue >= this.host.window / 4) {
      if (!this.soon) {
        this.soon = true;
        queueMicrotask(() => this.sendCredit());
      }
    } else if (this.creditDue === n) {
      setImmediate(() => this.sendCredit());
    }
  }

  private sendCredit(): void {
    this.soon = false;
    const n = this.creditDue;
    this.creditDue = 0;
    if (n > 0) this.host.sendCredit(n);
  }
}
