/**
 * Termination signals for hosts that opt in ({@link Engine.handleSignals}):
 * instead of killing the host with its calls unrecorded, a SIGTERM or SIGHUP
 * cancels the running calls of the engines that opted in, waits for their
 * results and closes them, then exits with 128 + the signal's number as the
 * default action would have. A second signal exits at once. One set of
 * process listeners serves every engine, so they shut down together.
 */
import { constants } from 'node:os';
import { BadOptionError } from './protocol/errors.js';

/** Signals a host may hand to {@link handleSignals} (SIGKILL and SIGSTOP cannot be caught; SIGUSR1 is Node's inspector). */
export const HANDLED_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGHUP', 'SIGINT', 'SIGQUIT'];

/** Options of {@link Engine.handleSignals}. */
export interface SignalOptions {
  /** The signals handled, among SIGTERM, SIGHUP, SIGINT and SIGQUIT (else EBADOPTION). @default ['SIGTERM', 'SIGHUP'] */
  signals?: readonly NodeJS.Signals[];
  /** Exit the process (128 + the signal's number) once the engines are closed. @default true */
  exit?: boolean;
}

/** What the handler needs of an engine. */
export interface SignalTarget {
  /** Cancels every running call with `reason`. */
  cancelAll(reason: string): void;
  /** Waits for the calls' results and closes. */
  close(): Promise<void>;
  /** Kills every running call's process groups, synchronously. */
  killAllProcesses(): void;
}

interface Registration {
  target: SignalTarget;
  signals: readonly NodeJS.Signals[];
  exit: boolean;
}

const registrations = new Set<Registration>();
const listening = new Map<NodeJS.Signals, () => void>();
let shuttingDown: NodeJS.Signals | undefined;

/** 128 + the number of `signal`, the status a shell reports for a process it ended. */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

function onSignal(signal: NodeJS.Signals): void {
  const mine = [...registrations].filter((r) => r.signals.includes(signal));
  if (shuttingDown) {
    for (const r of registrations) r.target.killAllProcesses();
    process.exit(signalExitCode(shuttingDown));
  }
  shuttingDown = signal;
  const exit = mine.some((r) => r.exit);
  void Promise.allSettled(
    mine.map(async (r) => {
      r.target.cancelAll(`the host received ${signal}`);
      await r.target.close();
      registrations.delete(r);
    }),
  ).then(() => {
    if (exit) process.exit(signalExitCode(signal));
    shuttingDown = undefined;
    sync();
  });
}

/** Listens to exactly the signals some registration wants. */
function sync(): void {
  const wanted = new Set<NodeJS.Signals>();
  for (const r of registrations) for (const s of r.signals) wanted.add(s);
  // While shutting down every listener stays: a second signal must not take the default action.
  if (shuttingDown) return;
  for (const [s, listener] of listening) {
    if (wanted.has(s)) continue;
    process.off(s, listener);
    listening.delete(s);
  }
  for (const s of wanted) {
    if (listening.has(s)) continue;
    const listener = () => onSignal(s);
    process.on(s, listener);
    listening.set(s, listener);
  }
}

/** Makes `signals` of this process shut `target` down cleanly; returns a function that undoes it. */
export function handleSignals(target: SignalTarget, options: SignalOptions = {}): () => void {
  const signals = [...(options.signals ?? ['SIGTERM', 'SIGHUP'])];
  for (const s of signals) {
    if (!HANDLED_SIGNALS.includes(s)) {
      throw new BadOptionError(`signals: ${JSON.stringify(s)} is not one of ${HANDLED_SIGNALS.join(', ')}`, {
        option: 'signals',
      });
    }
  }
  const reg: Registration = { target, signals, exit: options.exit !== false };
  registrations.add(reg);
  sync();
  return () => {
    registrations.delete(reg);
    sync();
  };
}
