/**
 * Checking a worker's completion against the wire schema: the worker runs
 * tool code, so it is parsed like any input, but the common `{ mode }`
 * alone is recognised without running the schema, whose parse allocates
 * even for an empty completion.
 */
import { firstIssue } from '../protocol/issues.js';
import { type WireCompletion, wireCompletionSchema } from '../protocol/messages.js';

/** The parse result: the completion as the schema gives it, or one line naming the first bad field. */
export type ParsedCompletion = { success: true; data: WireCompletion } | { success: false; message: string };

/** Parses `raw` as a {@link WireCompletion}: the same result as the schema's, without it for `{ mode }` alone. */
export function parseCompletion(raw: unknown): ParsedCompletion {
  if (modeOnly(raw)) return { success: true, data: { mode: raw.mode } };
  const parsed = wireCompletionSchema.safeParse(raw);
  if (parsed.success) return { success: true, data: parsed.data };
  // One line, as every argument error gives it: zod's own message dumps every issue.
  const i = firstIssue(parsed.error, raw);
  return { success: false, message: `${i.path || '(completion)'}: ${i.message} (${i.got})` };
}

/** A plain object whose one own property is a valid `mode` (structured clone gives only plain data). */
function modeOnly(raw: unknown): raw is { mode: 'streamed' | 'full' } {
  if (typeof raw !== 'object' || raw === null || Object.getPrototypeOf(raw) !== Object.prototype) return false;
  const mode = (raw as { mode?: unknown }).mode;
  if (mode !== 'streamed' && mode !== 'full') return false;
  let keys = 0;
  for (const k in raw) {
    if (k !== 'mode' || ++keys > 1) return false;
  }
  return keys === 1;
}
