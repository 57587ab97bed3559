/** The engine's default recorder, the session log, loaded on first use: most calls carry no session, and an open never waits for the log's modules. */
import type { Store } from '../../store/store.js';
import type { CallRecorder, CallStartInfo } from '../call/call-types.js';
import { ClosedError } from '../protocol/errors.js';
import type { TerminalResult } from '../result.js';
import type { SessionRecorder } from './recorder.js';

/** A {@link SessionRecorder} created when a call with a session (or a revert) first needs it. */
export class EngineSessionLog implements CallRecorder {
  private readonly store: Store;
  private recorder: Promise<SessionRecorder> | undefined;
  private closed = false;

  constructor(store: Store) {
    this.store = store;
  }

  /** The session recorder, loaded on the first request. ECLOSED once {@link close} has run. */
  get(): Promise<SessionRecorder> {
    if (this.closed) return Promise.reject(new ClosedError('the session log is closed'));
    this.recorder ??= import('./recorder.js').then((m) => new m.SessionRecorder(this.store));
    return this.recorder;
  }

  /** Records a call's start; a call without a session is not recorded (as by SessionRecorder). */
  async started(info: CallStartInfo): Promise<void> {
    if (info.session === undefined) return;
    await (await this.get()).started(info);
  }

  /** Records a call's end, durably; a call without a session is not recorded. */
  async completed(result: TerminalResult): Promise<void> {
    if (result.session === undefined) return;
    await (await this.get()).completed(result);
  }

  /** Closes the log's files, if it was ever loaded. */
  async close(): Promise<void> {
    this.closed = true;
    const recorder = await this.recorder?.catch(() => undefined);
    await recorder?.close();
  }
}
