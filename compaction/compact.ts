/**
 * Compaction: turning a model history into a summary plus the recent items
 * kept after it, with a host-supplied summarizer.
 *
 * The first trial sends the entire active history: the prior summary,
 * everything since, and the recent items that will be kept. Only two failures
 * allow a second trial, on the private pruned snapshot (prune.ts): a local fit
 * rejection (EFITREJECTED) or a provider context-length failure
 * (ECONTEXTLENGTH), raised by the host's fit check or summarizer. Anything
 * else ends compaction at once; the fact that the parent context overflowed
 * (why a host usually compacts) is no reason to prune. Every failure returns
 * the caller's history as it was. Compaction writes nothing anywhere: the
 * retry snapshot lives only in the summarizer input.
 */
import { BadOptionError } from '../engine/protocol/errors.js';
import { firstIssue } from '../engine/protocol/issues.js';
import { z } from '../engine/protocol/zod.js';
import { type HistoryItem, parseHistory, type SummaryItem } from './history.js';
import { copyHistory, pruneForRetry } from './prune.js';
import { renderHistory } from './render.js';

/** Why the host compacts. Informational: it never changes what is sent or whether pruning happens. */
export type CompactionTrigger = 'manual' | 'overflow';

/** What the summarizer (and the fit check) receives for one trial. */
export interface SummarizerInput {
  /** 1 for the full-history trial, 2 for the pruned retry. */
  attempt: 1 | 2;
  /** True on the pruned retry. */
  pruned: boolean;
  /** The items rendered as text (docs/compaction.md describes the format exactly). */
  text: string;
  /**
   * The items of this trial: a private deep copy of the active history, or
   * the pruned snapshot. Changing them changes nothing for the caller.
   */
  items: HistoryItem[];
  /** Index in `items` of the first item that will be kept verbatim after the summary (`items.length` when none). */
  recentStart: number;
  /** Why the host compacts. */
  trigger: CompactionTrigger;
  /** The caller's abort signal, if any. */
  signal?: AbortSignal;
}

/** Produces the summary text; supplied by the host (usually a model call). */
export type Summarizer = (input: SummarizerInput) => Promise<string>;

/** Options of {@link compact}. */
export interface CompactOptions {
  /**
   * How many trailing items of the active history to keep after the summary
   * (the recent suffix). The suffix is extended backwards when needed so that
   * it holds the call of every result in it, and it never includes the prior
   * summary.
   */
  keepRecent: number;
  /**
   * Local check that an input fits the summarizer's context. Returning false
   * (or throwing FitRejectedError) is a fit rejection.
   */
  fitCheck?: (input: SummarizerInput) => boolean | Promise<boolean>;
  /** @default 'manual' */
  trigger?: CompactionTrigger;
  /** Aborting stops before the next trial; the summarizer receives it too. */
  signal?: AbortSignal;
}

/** Why compaction failed. */
export type CompactionFailureReason =
  /** The retry's input was rejected by the fit check too. */
  | 'fit-rejected'
  /** The provider rejected the retry's input as too long too. */
  | 'context-length'
  /** The fit check or summarizer failed some other way. */
  | 'error'
  /** The summary was not a string, or was empty or blank, or not well-formed text. */
  | 'invalid-summary'
  /** The signal was aborted before a trial. */
  | 'aborted';

/** The outcome of {@link compact}. */
export type CompactionResult =
  | {
      ok: true;
      summary: string;
      /** The new context: the summary item, then the recent suffix (the caller's own item objects). */
      history: HistoryItem[];
      summaryItem: SummaryItem;
      /** Length of the recent suffix in `history`. */
      kept: number;
      attempts: 1 | 2;
      pruned: boolean;
    }
  | {
      ok: false;
      reason: CompactionFailureReason;
      /** What the fit check or summarizer threw, as thrown (the error of the last trial). */
      error?: unknown;
      /** The caller's history: the very same array, unchanged. */
      history: readonly HistoryItem[];
      attempts: 0 | 1 | 2;
      pruned: boolean;
    };

const optionsSchema = z.object({
  keepRecent: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  fitCheck: z
    .custom<NonNullable<CompactOptions['fitCheck']>>((v) => typeof v === 'function', 'must be a function')
    .optional(),
  trigger: z.enum(['manual', 'overflow']).optional(),
  signal: z.instanceof(AbortSignal).optional(),
});

/** Error codes that mean "this input is too large for the summarizer", the only ones that allow the retry. */
export const RETRY_CODES: ReadonlySet<string> = new Set(['EFITREJECTED', 'ECONTEXTLENGTH']);

function codeOf(err: unknown): string | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

// Lone surrogates cannot be encoded as UTF-8: a summary holding one would not
// survive a log or a provider request intact.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when `s` is usable as a summary: a string with non-blank, well-formed text. */
export function isValidSummary(s: unknown): s is string {
  return typeof s === 'string' && s.trim() !== '' && !LONE_SURROGATE.test(s);
}

/** Start of the active history: the last summary, or the beginning. Items before it are discarded logs. */
function activeStart(history: readonly HistoryItem[]): number {
  for (let i = history.length - 1; i >= 0; i--) if (history[i]?.type === 'summary') return i;
  return 0;
}

/**
 * Index in `history` of the first item of the recent suffix: the last
 * `keepRecent` items after `bodyStart`, moved back so that every result in
 * the suffix has its call in it too.
 */
export function recentSuffixStart(history: readonly HistoryItem[], bodyStart: number, keepRecent: number): number {
  const callIndex = new Map<string, number>();
  for (let i = bodyStart; i < history.length; i++) {
    const item = history[i];
    if (item?.type === 'tool_call') callIndex.set(item.callId, i);
  }
  let start = Math.max(bodyStart, history.length - keepRecent);
  // Scanning from the end, moving `start` back as results demand, and the
  // loop condition follows `start` as it moves.
  for (let i = history.length - 1; i >= start; i--) {
    const item = history[i];
    if (item?.type !== 'tool_result') continue;
    const c = callIndex.get(item.callId);
    if (c !== undefined && c < start) start = c;
  }
  return start;
}

type Trial = { ok: true; summary: unknown } | { ok: false; error: unknown; retryable: boolean };

async function runTrial(
  input: SummarizerInput,
  summarizer: Summarizer,
  fitCheck: CompactOptions['fitCheck'],
): Promise<Trial> {
  try {
    if (fitCheck !== undefined && (await fitCheck(input)) === false) {
      return { ok: false, error: undefined, retryable: true };
    }
    return { ok: true, summary: await summarizer(input) };
  } catch (error) {
    const code = codeOf(error);
    return { ok: false, error, retryable: code !== undefined && RETRY_CODES.has(code) };
  }
}

function failureReason(error: unknown): CompactionFailureReason {
  const code = codeOf(error);
  if (error === undefined || code === 'EFITREJECTED') return 'fit-rejected';
  if (code === 'ECONTEXTLENGTH') return 'context-length';
  return 'error';
}

/**
 * Compacts `history` with `summarizer` (see the module comment and
 * docs/compaction.md). Never modifies `history`; never throws for a failed
 * trial (the result says why). Throws BadArgumentsError for an invalid
 * history and BadOptionError for invalid options or a summarizer that is not
 * a function.
 */
export async function compact(
  history: readonly HistoryItem[],
  summarizer: Summarizer,
  options: CompactOptions,
): Promise<CompactionResult> {
  const parsedOptions = optionsSchema.safeParse(options);
  if (!parsedOptions.success) {
    const i = firstIssue(parsedOptions.error, options);
    throw new BadOptionError(`compact options.${i.path}: ${i.message} (${i.got})`, { option: i.path });
  }
  if (typeof summarizer !== 'function') {
    throw new BadOptionError(`compact: the summarizer must be a function, got ${typeof summarizer}`);
  }
  parseHistory(history);
  const { keepRecent, fitCheck, signal } = options;
  const trigger = options.trigger ?? 'manual';

  const start = activeStart(history);
  const bodyStart = history[start]?.type === 'summary' ? start + 1 : start;
  const suffixStart = recentSuffixStart(history, bodyStart, keepRecent);
  // Both taken now: the result is built from the history as it was when
  // compaction started, whatever the caller appends while the summarizer runs.
  const active = history.slice(start);
  const suffix = history.slice(suffixStart);
  const recentStart = suffixStart - start;

  const fail = (
    reason: CompactionFailureReason,
    attempts: 0 | 1 | 2,
    error?: unknown,
  ): CompactionResult & { ok: false } => {
    const r: CompactionResult & { ok: false } = { ok: false, reason, history, attempts, pruned: attempts === 2 };
    if (error !== undefined) r.error = error;
    return r;
  };

  let attempt: 1 | 2 = 1;
  for (;;) {
    if (signal?.aborted) return fail('aborted', attempt === 1 ? 0 : 1, signal.reason);
    const items = attempt === 1 ? copyHistory(active) : pruneForRetry(active);
    const input: SummarizerInput = {
      attempt,
      pruned: attempt === 2,
      text: renderHistory(items),
      items,
      recentStart,
      trigger,
    };
    if (signal !== undefined) input.signal = signal;
    const trial = await runTrial(input, summarizer, fitCheck);
    if (!trial.ok) {
      if (trial.retryable && attempt === 1) {
        attempt = 2;
        continue;
      }
      return trial.retryable
        ? fail(failureReason(trial.error), attempt, trial.error)
        : fail('error', attempt, trial.error);
    }
    if (!isValidSummary(trial.summary)) return fail('invalid-summary', attempt);
    const summaryItem: SummaryItem = { type: 'summary', content: trial.summary };
    return {
      ok: true,
      summary: trial.summary,
      history: [summaryItem, ...suffix],
      summaryItem,
      kept: suffix.length,
      attempts: attempt,
      pruned: attempt === 2,
    };
  }
}
