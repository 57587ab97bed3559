/**
 * One server-sent-events connection on one call: buffered frames after the
 * client's Last-Event-ID, live frames, the terminal `completed` frame. Writes
 * wait for 'drain'; a gap, whatever caused it, is one `lagged` frame with the
 * id of the last missed frame, so a reconnecting client resumes from the right place.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { writeWithBackpressure } from './http.js';
import { type Frame, sseFrame, type TrackedCall } from './tracker.js';

/** Headers of an event stream. */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  connection: 'keep-alive',
  // Tell buffering proxies to pass frames through as they come.
  'x-accel-buffering': 'no',
};

/** Milliseconds an EventSource waits before reconnecting (sent as `retry:`). */
const RETRY_MS = 1000;

/** An event stream's writer: frames with backpressure, and keep-alive comments while it is idle. */
export interface SseWriter {
  /** Writes `text` (whole frames); false once the client is gone. */
  write(text: string): Promise<boolean>;
  /** Stops the keep-alive comments. */
  stop(): void;
}

/** Starts an event stream's writer on `res`, a `: keep-alive` comment after every `heartbeatMs` without a write. */
export function sseWriter(res: ServerResponse, heartbeatMs: number): SseWriter {
  let lastWrite = Date.now();
  const heartbeat = setInterval(() => {
    // Only when idle and not backed up: a comment must never add to a stalled client's backlog.
    if (Date.now() - lastWrite >= heartbeatMs && !res.writableNeedDrain && !res.writableEnded) {
      lastWrite = Date.now();
      res.write(': keep-alive\n\n');
    }
  }, heartbeatMs);
  heartbeat.unref();
  return {
    write(text) {
      lastWrite = Date.now();
      return writeWithBackpressure(res, text);
    },
    stop: () => clearInterval(heartbeat),
  };
}

/** Options of {@link streamCallEvents}. */
export interface StreamOptions {
  /** Last-Event-ID of a reconnecting client (0 for a new one). */
  lastEventId: number;
  /** Milliseconds between keep-alive comments while nothing else is sent. */
  heartbeatMs: number;
  /** Also send the call's progress events (unnumbered; see TrackedCall.progressHub). */
  progress?: boolean;
}

/**
 * Streams the events of `call` after `lastEventId` on `res` (the caller has
 * checked that the client does not already have the terminal frame). Resolves
 * when the response has ended or the client went away.
 */
export async function streamCallEvents(
  call: TrackedCall,
  req: IncomingMessage,
  res: ServerResponse,
  options: StreamOptions,
): Promise<void> {
  // Subscribe before reading the buffer: every frame is then in one or the other (or both, deduplicated by id).
  const sub = call.hub.subscribe();
  const progress = options.progress ? call.progressHub.subscribe() : undefined;
  const onClose = () => {
    void sub.return?.();
    void progress?.return?.();
  };
  res.on('close', onClose);
  req.socket.setNoDelay(true);
  res.writeHead(200, SSE_HEADERS);
  let sent = options.lastEventId;
  const writer = sseWriter(res, options.heartbeatMs);
  const write = writer.write;

  const emit = async (f: Frame): Promise<boolean> => {
    if (f.id <= sent) return true;
    if (f.id > sent + 1) {
      const dropped = f.id - sent - 1;
      const ok = await write(sseFrame(f.id - 1, 'lagged', `{"type":"lagged","dropped":${dropped}}`));
      if (!ok) return false;
    }
    sent = f.id;
    return write(f.text);
  };

  /** Set once `completed` is written: nothing may follow it. */
  let ended = false;
  /** Writes progress frames as they come, between numbered ones (each write is a whole frame). */
  const pumpProgress = async (): Promise<void> => {
    if (!progress) return;
    const first = call.latestProgress;
    if (first !== undefined && !ended && !(await write(first))) return;
    for await (const text of progress) {
      // The hub's lagged markers: missed progress is superseded by the next one.
      if (typeof text !== 'string') continue;
      if (ended || !(await write(text))) return;
    }
  };

  let progressDone: Promise<void> | undefined;
  try {
    if (!(await write(`retry: ${RETRY_MS}\n\n`))) return;
    for (const f of call.framesAfter(sent)) {
      if (!(await emit(f))) return;
    }
    progressDone = pumpProgress();
    for await (const item of sub) {
      // The hub's own lagged markers carry no id; the gap they leave is reported by emit() from the ids.
      if (!('id' in item)) continue;
      if (item.event === 'completed') ended = true;
      if (!(await emit(item))) return;
      if (ended) break;
    }
    await new Promise<void>((resolve) => {
      if (res.destroyed) return resolve();
      res.once('close', resolve);
      res.end(resolve);
    });
  } finally {
    ended = true;
    writer.stop();
    res.off('close', onClose);
    await sub.return?.();
    await progress?.return?.();
    await progressDone;
  }
}
