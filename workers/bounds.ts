/**
 * Bounds what a tool hands back besides its output (limits in
 * engine/protocol/limits.ts, the table in docs/tools.md). Over its bound a
 * text is cut on a code point; an error's message and the final display are
 * first sent whole, as artifacts. No text is copied whole.
 */
import { ProtocolError, ResourceLimitError, type SerializedError } from '../engine/protocol/errors.js';
import { COMPLETION_BOUNDS } from '../engine/protocol/limits.js';
import type { CompletionFields, EmittedMessage, TextKind } from '../engine/protocol/messages.js';
import { cutMarker, cutMarkerBytes, detachString, unitPrefix, utf8PrefixEnd } from '../engine/protocol/text.js';

/** Sends a text whole to the engine, ahead of the completion (CallRun.sendText). */
export type SendText = (kind: TextKind, text: string) => Promise<void>;

/** A text cut to its bound: the part kept, and the whole's UTF-8 size when it was cut. */
interface Cut {
  text: string;
  fullBytes?: number;
}

/** `text` cut to at most `maxBytes` of UTF-8 (on a code point); the size of the whole when it was longer. */
function cutText(text: string, maxBytes: number): Cut {
  // A string of n units is at most 3n bytes: short texts need no measuring at all.
  if (text.length * 3 <= maxBytes) return { text };
  const { end } = utf8PrefixEnd(text, maxBytes);
  if (end === text.length) return { text };
  return { text: detachString(text.slice(0, end)), fullBytes: Buffer.byteLength(text, 'utf8') };
}

/** True once `value`'s JSON is certainly over `bound`, without building a huge value's JSON. */
function surelyOver(value: unknown, bound: number): boolean {
  let size = 0;
  const stack: unknown[] = [value];
  // Each object is counted once: a cycle is not JSON at all, and must not look huge.
  const seen = new Set<object>();
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') size += v.length + 2;
    else if (v !== null && typeof v === 'object') {
      if (seen.has(v)) continue;
      seen.add(v);
      // A very wide value: stop walking and let JSON decide.
      if (seen.size > 100_000) return false;
      for (const [k, x] of Object.entries(v)) {
        size += k.length + 4;
        stack.push(x);
      }
    } else size += 4;
    if (size > bound) return true;
  }
  return false;
}

/** JSON of a value whose size-walk stayed under its bound (so the JSON is small); throws EPROTOCOL when it has none. */
function jsonOf(value: unknown, what: string): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (err) {
    throw new ProtocolError(`${what} must be plain JSON: ${(err as Error)?.message ?? String(err)}`);
  }
}

/** Error details over their bound become a cut of their JSON; non-JSON details a note. The error stands. */
function boundDetails(details: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (details === undefined) return undefined;
  const max = COMPLETION_BOUNDS.errorDetailsBytes;
  // Past 64 times the bound, not even their JSON is built: a cut of it would say little more.
  if (surelyOver(details, max * 64)) return { cut: `details over ${max * 64} bytes of JSON were dropped` };
  let json: string | undefined;
  try {
    json = JSON.stringify(details);
  } catch (err) {
    return { cut: `details are not JSON: ${(err as Error)?.message ?? String(err)}` };
  }
  const bytes = Buffer.byteLength(json ?? '', 'utf8');
  if (bytes <= max) return details;
  return { cut: `${cutText(json ?? '', max / 4).text}…`, bytes };
}

/** The error bounded: a message past its bound is sent whole and cut (`cut`: its size); details cut as JSON. */
export async function boundError(
  error: SerializedError,
  send: SendText,
): Promise<{ error: SerializedError; cut?: number }> {
  const max = COMPLETION_BOUNDS.errorMessageBytes;
  // The marker the engine adds counts against the bound, as for the display.
  const over = cutText(error.message, max).fullBytes;
  const message = over === undefined ? { text: error.message } : cutText(error.message, max - cutMarkerBytes(over));
  const details = boundDetails(error.details);
  const bounded: SerializedError = { code: error.code, message: message.text };
  if (details !== undefined) bounded.details = details;
  if (message.fullBytes === undefined) return { error: bounded };
  await send('error', error.message);
  return { error: bounded, cut: message.fullBytes };
}

function boundMessages(messages: EmittedMessage[] | undefined): EmittedMessage[] | undefined {
  if (messages === undefined) return undefined;
  if (!Array.isArray(messages)) return messages;
  if (messages.length > COMPLETION_BOUNDS.messages) {
    throw new ResourceLimitError(
      `the completion emits ${messages.length} messages, more than ${COMPLETION_BOUNDS.messages}`,
      { messages: messages.length, bound: COMPLETION_BOUNDS.messages },
    );
  }
  return messages.map((m) => {
    if (typeof m?.content !== 'string') return m;
    const c = cutText(m.content, COMPLETION_BOUNDS.messageBytes);
    if (c.fullBytes === undefined) return m;
    return { ...m, content: `${c.text}${cutMarker(c.fullBytes - Buffer.byteLength(c.text))}` };
  });
}

function checkAttachments(attachments: CompletionFields['attachments']): void {
  if (!Array.isArray(attachments)) return;
  if (attachments.length > COMPLETION_BOUNDS.attachments) {
    throw new ResourceLimitError(
      `the completion has ${attachments.length} attachments, more than ${COMPLETION_BOUNDS.attachments}`,
      { attachments: attachments.length, bound: COMPLETION_BOUNDS.attachments },
    );
  }
  let bytes = 0;
  for (const a of attachments) bytes += typeof a?.data === 'string' ? a.data.length : 0;
  if (bytes > COMPLETION_BOUNDS.attachmentsBytes) {
    throw new ResourceLimitError(
      `the completion's attachments take ${bytes} bytes, more than ${COMPLETION_BOUNDS.attachmentsBytes}`,
      { bytes, bound: COMPLETION_BOUNDS.attachmentsBytes },
    );
  }
}

/**
 * The terminal fields of a completion, bounded. Throws
 * {@link ResourceLimitError} for what cannot be cut (too many messages or
 * attachments, too large ones, JSON over its bound). Returns the sizes of
 * the texts cut and sent whole.
 */
export async function boundCompletion(
  fields: CompletionFields,
  displayBytes: number,
  send: SendText,
): Promise<{ fields: CompletionFields; cut?: { error?: number; display?: number } }> {
  const out: CompletionFields = { ...fields };
  const cut: { error?: number; display?: number } = {};
  if (typeof fields.note === 'string' && fields.note.length > COMPLETION_BOUNDS.noteChars) {
    const marker = (n: number) => `… [${n} more characters cut]`;
    const kept = unitPrefix(fields.note, COMPLETION_BOUNDS.noteChars - marker(fields.note.length).length);
    out.note = `${kept}${marker(fields.note.length - kept.length)}`;
  }
  const messages = boundMessages(fields.messages);
  if (messages !== undefined) out.messages = messages;
  checkAttachments(fields.attachments);
  const both = { m: fields.metadata ?? null, e: messages ?? null };
  const max = COMPLETION_BOUNDS.fieldsBytes;
  if (surelyOver(both, max) || Buffer.byteLength(jsonOf(both, 'metadata and messages') ?? '', 'utf8') > max) {
    throw new ResourceLimitError(
      `the completion's metadata and messages take more than ${COMPLETION_BOUNDS.fieldsBytes} bytes of JSON`,
      { bound: COMPLETION_BOUNDS.fieldsBytes },
    );
  }
  if (fields.error !== undefined && typeof fields.error?.message === 'string') {
    const bounded = await boundError(fields.error, send);
    out.error = bounded.error;
    if (bounded.cut !== undefined) cut.error = bounded.cut;
  }
  if (typeof fields.display === 'string' && cutText(fields.display, displayBytes).fullBytes !== undefined) {
    // The marker the engine adds counts too: the final display stays within its bound.
    const full = Buffer.byteLength(fields.display, 'utf8');
    const d = cutText(fields.display, Math.max(0, displayBytes - cutMarkerBytes(full)));
    if (d.fullBytes !== undefined) {
      await send('display', fields.display);
      out.display = d.text;
      cut.display = d.fullBytes;
    }
  }
  return cut.error === undefined && cut.display === undefined ? { fields: out } : { fields: out, cut };
}
