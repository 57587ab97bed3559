/**
 * A call's end once its status is decided: publish, keep the whole texts,
 * vouch for the pin, render the model view, record, release. Each step hands
 * on a new {@link Ending}; a disk failure turns the verdict into EDISK.
 */
import type { Pin, Store } from '../../store/store.js';
import { finalDisplay } from '../presentation/final-display.js';
import { assertModelViewWithinBound } from '../presentation/model-view.js';
import { withStatusLine } from '../presentation/status-line.js';
import { makeError, type SluiceError, serializeError, toSluiceError } from '../protocol/errors.js';
import type { TextKind, WireCompletion } from '../protocol/messages.js';
import type { SandboxPolicy } from '../protocol/sandbox.js';
import type { ToolInfo } from '../registry.js';
import type { CallStatus, FullTextRefs, OutputRef, TerminalResult } from '../result.js';
import { textWithCutMarker, withCutMarker } from './arrived.js';
import type { CallRecorder } from './call-types.js';
import type { Capture } from './capture.js';
import type { FullTexts } from './full-text.js';
import { PageCapture } from './page-capture.js';
import { keepFullTexts, publishAccepted } from './publish.js';
import type { TerminalStatus } from './terminal-status.js';

/** What finishing reads of its call. */
export interface Finishing {
  readonly callId: string;
  readonly tool: ToolInfo;
  readonly args: unknown;
  readonly session: string | undefined;
  readonly startedAt: number;
  readonly capture: Capture | PageCapture;
  /** Whole texts of fields the worker cut to their bounds. */
  readonly texts: FullTexts;
  /** The sizes the worker announced for those fields. */
  readonly textSizes: Partial<Record<TextKind, number>>;
  readonly store: Store;
  readonly maxModelBytes: number;
  readonly recorder: CallRecorder | undefined;
  /** Keep a self-paginating tool's page bytes (for a raw read). */
  readonly keepPage: boolean;
  /** The policy its processes ran under, recorded with the result. */
  readonly sandbox: SandboxPolicy | undefined;
}

/** What each stream had accepted, when the output holds only what reached the disk. */
type Accepted = Array<{ name: string; bytes: number; lines: number }>;

/** A call's end as it is worked out: the verdict and what the result refers to. */
interface Ending {
  verdict: TerminalStatus;
  output: OutputRef | null;
  /** The model view without its status line. */
  view: string;
  /** Protects what was published until it is recorded. */
  pin: Pin | undefined;
  accepted: Accepted | undefined;
  fullText: FullTextRefs;
}

/** The terminal result of a call whose status was decided as `decided`, recorded, and its page bytes if kept. */
export async function finishCall(
  f: Finishing,
  decided: TerminalStatus,
  completion: WireCompletion | undefined,
): Promise<{ result: TerminalResult; pageBytes: Buffer | undefined }> {
  const published = await publish(f, decided, completion);
  const kept = await vouchFor(await keepTexts(f, published, completion));
  const { ending, model } = modelView(f, markCuts(f, kept), completion);
  const result = terminalResult(f, ending, model, completion);
  let pageBytes: Buffer | undefined;
  if (f.capture instanceof PageCapture) {
    if (f.keepPage && result.status === 'success') pageBytes = f.capture.bytes();
    f.capture.discard();
  }
  return { result: await record(f, result, ending, completion), pageBytes };
}

/** The verdict of a call that failed with `error` after its tool ended: a failure the tool finalised no longer stands. */
function failedWith(v: TerminalStatus, error: SluiceError): TerminalStatus {
  return { ...v, status: 'failed', complete: false, error, toolsOwnError: false };
}

/** True when the tool's own final display stands in the result. */
function toolDisplayStands(v: Pick<TerminalStatus, 'status' | 'error' | 'toolsOwnError'>, c?: WireCompletion): boolean {
  return c?.display !== undefined && v.status !== 'cancelled' && (!v.error || v.toolsOwnError);
}

/** Publishes what was accepted; a write that failed part-way keeps the rest and fails the call, saying what each stream had accepted. */
async function publish(f: Finishing, verdict: TerminalStatus, completion?: WireCompletion): Promise<Ending> {
  const nothing: Ending = { verdict, output: null, view: '', pin: undefined, accepted: undefined, fullText: {} };
  try {
    const { output, model, pin, cut } = await publishAccepted(f.capture, f.store, {
      ended: completion !== undefined,
      pageMetadata: verdict.status === 'success' ? completion?.metadata : undefined,
    });
    const ending = { ...nothing, output, view: model, pin };
    if (!cut) return ending;
    const e = toSluiceError(cut.error, 'EDISK');
    const streams = cut.accepted.map((a) => ({ stream: a.name, bytes: a.bytes, lines: a.lines }));
    const error = makeError(e.code, e.message, { ...e.details, accepted: streams });
    return { ...ending, verdict: failedWith(verdict, error), accepted: cut.accepted };
  } catch (err) {
    return { ...nothing, verdict: failedWith(verdict, toSluiceError(err, 'EDISK')) };
  }
}

/** Keeps the whole texts of cut fields, only those the result shows. */
async function keepTexts(f: Finishing, e: Ending, completion?: WireCompletion): Promise<Ending> {
  const { error, reportedError } = e.verdict;
  const kept = await keepFullTexts(f.texts, f.store, e.pin, {
    ...(error !== undefined && error === reportedError ? { error: f.textSizes.error } : {}),
    ...(toolDisplayStands(e.verdict, completion) ? { display: f.textSizes.display } : {}),
  });
  return { ...e, pin: kept.pin, fullText: kept.refs };
}

/** An S3 store's lease may have been reclaimed while this host stalled (store/s3/lease.ts): then nothing it pinned is referenced. */
async function vouchFor(e: Ending): Promise<Ending> {
  try {
    await e.pin?.vouch();
    return e;
  } catch (err) {
    return { ...e, verdict: failedWith(e.verdict, toSluiceError(err, 'EDISK')), output: null, fullText: {} };
  }
}

/** The reported error with the marker saying how much of it was cut and where its whole is. */
function markCuts(f: Finishing, e: Ending): Ending {
  const { error, reportedError } = e.verdict;
  if (error === undefined || error !== reportedError) return e;
  return { ...e, verdict: { ...e.verdict, error: withCutMarker(error, f.textSizes.error, e.fullText.error) } };
}

/** The model view with its status line; the ending's `view` stays without, so a failed recording never gives it a second. */
function modelView(f: Finishing, e: Ending, completion?: WireCompletion): { ending: Ending; model: string } {
  const { status, complete, error } = e.verdict;
  const model = withStatusLine(e.view, {
    status,
    complete,
    error,
    note: completion?.note,
    wholeError: e.fullText.error,
  });
  try {
    // A page is bounded by its tool and PageCapture, never by toolOutput: configuration cannot cut or fail it.
    if (!(f.capture instanceof PageCapture)) assertModelViewWithinBound(model, f.maxModelBytes);
    return { ending: e, model };
  } catch (err) {
    // Cannot happen with the reserve the status line has; if it ever does, the view is replaced
    // by the status line alone (never cut), and a success becomes a failure that says why.
    const verdict =
      status === 'success' ? failedWith(e.verdict, toSluiceError(err)) : { ...e.verdict, complete: false };
    const line = withStatusLine('', {
      status: verdict.status,
      complete: false,
      error: verdict.error,
      note: completion?.note,
    });
    return { ending: { ...e, verdict, view: '' }, model: line };
  }
}

function terminalResult(f: Finishing, e: Ending, model: string, completion?: WireCompletion): TerminalResult {
  const { status, complete, error } = e.verdict;
  const durationMs = Date.now() - f.startedAt;
  const result: TerminalResult = {
    callId: f.callId,
    tool: f.tool.name,
    status,
    complete,
    display: displayOf(f, e.verdict, completion, durationMs, e.output, e),
    model,
    output: e.output,
    metadata: completion?.metadata ?? {},
    attachments: status === 'success' || status === 'failed' ? (completion?.attachments ?? []) : [],
    messages: completion?.messages ?? [],
    startedAt: new Date(f.startedAt).toISOString(),
    durationMs,
  };
  if (f.session !== undefined) result.session = f.session;
  if (f.sandbox) result.sandbox = f.sandbox;
  if (error) result.error = serializeError(error);
  if (e.fullText.error || e.fullText.display) result.fullText = e.fullText;
  return result;
}

/** Records the result (a failed recording fails the call and says so), then releases the pin. */
async function record(
  f: Finishing,
  result: TerminalResult,
  e: Ending,
  completion: WireCompletion | undefined,
): Promise<TerminalResult> {
  try {
    await f.recorder?.completed(result);
    return result;
  } catch (err) {
    const error = toSluiceError(err, 'EDISK');
    const verdict = { status: 'failed', error, toolsOwnError: false } as const;
    const failed: TerminalResult = {
      ...result,
      status: 'failed',
      complete: false,
      error: serializeError(error),
      model: withStatusLine(e.view, { status: 'failed', complete: false, error }),
      display: displayOf(f, verdict, completion, result.durationMs, result.output),
    };
    // Once more, with the failure the caller gets: a write that failed part-way left at most a torn
    // line, which replay skips, and would otherwise show this call as interrupted.
    await f.recorder?.completed(failed).catch(() => {});
    return failed;
  } finally {
    await e.pin?.release();
  }
}

/** The final display (engine/presentation/final-display.ts) of a call that ended so. */
function displayOf(
  f: Finishing,
  v: { status: CallStatus; error: SluiceError | undefined; toolsOwnError: boolean },
  completion: WireCompletion | undefined,
  durationMs: number,
  output: OutputRef | null,
  kept?: Pick<Ending, 'accepted' | 'fullText'>,
): string {
  const stands = toolDisplayStands(v, completion);
  return finalDisplay({
    tool: f.tool.name,
    status: v.status,
    durationMs,
    toolDisplay: stands
      ? textWithCutMarker(completion?.display as string, f.textSizes.display, kept?.fullText.display)
      : undefined,
    reason: v.error ? `${v.error.code}: ${v.error.message}` : (completion?.note ?? 'the tool reported failure'),
    output,
    lost: output === null && f.capture.stats().some((c) => c.bytes > 0),
    accepted: output === null ? undefined : kept?.accepted,
    args: f.args,
  });
}
