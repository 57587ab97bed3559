/**
 * The model history: what a host's conversation with the model holds, as
 * compaction sees it. User and assistant messages, tool calls (name,
 * structured arguments, call id), tool results (model view, output
 * references, status, metadata, attachments, emitted messages) and the
 * summary that replaced everything before it at the last compaction.
 *
 * It crosses boundaries (session logs, hosts, the summarizer), so it has a
 * zod schema; {@link parseHistory} checks a value against it and against the
 * pairing rules, and returns the same array (never a copy) typed.
 */
import { BadArgumentsError, ERROR_CODES, type SerializedError } from '../engine/protocol/errors.js';
import type { Attachment, EmittedMessage } from '../engine/protocol/messages.js';
import { MAX_STREAMS, streamNameProblem } from '../engine/protocol/streams.js';
import { z } from '../engine/protocol/zod.js';
import type { CallStatus, OutputRef, TerminalResult } from '../engine/result.js';
import { cloneJson, isJsonObject, isJsonValue, type JsonObject, type JsonValue } from './json.js';

/** A message from the user. */
export interface UserItem {
  type: 'user';
  content: string;
}

/** A message from the assistant (its text; its tool calls are separate items). */
export interface AssistantItem {
  type: 'assistant';
  content: string;
}

/** The summary produced by an earlier compaction: everything before it is discarded log. */
export interface SummaryItem {
  type: 'summary';
  content: string;
}

/** A tool call as the model made it. */
export interface ToolCallItem {
  type: 'tool_call';
  /** Correlates the call with its result; never an artifact address. */
  callId: string;
  /** Tool name, e.g. `read` or `bash`. */
  tool: string;
  /**
   * The arguments: a JSON object, or the JSON text of one as some providers
   * send it. Compaction parses both structurally (see docs/compaction.md).
   */
  args: JsonObject | string;
}

/** The result of a tool call, as the model saw it. */
export interface ToolResultItem {
  type: 'tool_result';
  callId: string;
  status: CallStatus;
  /** False when the tool did not finish normally; the stored output is then the accepted part. */
  complete: boolean;
  /** The model view text the model received. */
  model: string;
  /** References to the stored output (`page` for self-paginating tools, which store nothing; null when nothing was stored). */
  output: OutputRef | null;
  /** Why the call did not succeed. */
  error?: SerializedError;
  metadata: JsonObject;
  attachments: Attachment[];
  messages: EmittedMessage[];
}

/** One item of the model history. */
export type HistoryItem = UserItem | AssistantItem | SummaryItem | ToolCallItem | ToolResultItem;

/** Longest call id and tool name accepted (they are rendered on one header line). */
export const MAX_HISTORY_ID_LENGTH = 256;

const ONE_LINE = /^[^\u0000-\u001f\u007f]+$/;
const oneLineId = z
  .string()
  .min(1)
  .max(MAX_HISTORY_ID_LENGTH)
  .regex(ONE_LINE, 'must not contain control characters (line breaks, tabs, ...)');
const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const digest = z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex characters');
const streamName = z.string().superRefine((name, ctx) => {
  const problem = streamNameProblem(name);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});
const jsonObject = z.custom<JsonObject>(isJsonObject, 'must be a plain JSON object');
const jsonValue = z.custom<JsonValue>((v) => isJsonValue(v), 'must be a JSON value');

/** Schema of {@link OutputRef} (engine/result.ts). */
export const outputRefSchema: z.ZodType<OutputRef> = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('single'), digest, bytes: count, lines: count, truncated: z.boolean() }),
  z.object({
    kind: z.literal('streams'),
    manifest: digest,
    streams: z
      .array(z.object({ name: streamName, digest, bytes: count, lines: count, truncated: z.boolean() }))
      .min(1)
      .max(MAX_STREAMS)
      .refine((s) => new Set(s.map((x) => x.name)).size === s.length, 'stream names must be unique'),
  }),
  z.object({ kind: z.literal('page'), bytes: count, lines: count }),
]);

const serializedError = z.object({
  code: z.enum(ERROR_CODES),
  message: z.string(),
  details: z.record(z.string(), jsonValue).optional(),
});

/** Schema of one {@link HistoryItem}. Unknown keys are tolerated (and ignored by compaction). */
export const historyItemSchema: z.ZodType<HistoryItem> = z.discriminatedUnion('type', [
  z.object({ type: z.literal('user'), content: z.string() }),
  z.object({ type: z.literal('assistant'), content: z.string() }),
  z.object({ type: z.literal('summary'), content: z.string() }),
  z.object({
    type: z.literal('tool_call'),
    callId: oneLineId,
    tool: oneLineId,
    args: z.union([jsonObject, z.string()]),
  }),
  z.object({
    type: z.literal('tool_result'),
    callId: oneLineId,
    status: z.enum(['success', 'failed', 'cancelled']),
    complete: z.boolean(),
    model: z.string(),
    output: outputRefSchema.nullable(),
    error: serializedError.optional(),
    metadata: jsonObject,
    attachments: z.array(z.object({ mediaType: z.string().min(1), data: z.string(), name: z.string().optional() })),
    messages: z.array(z.object({ role: z.enum(['user', 'system']), content: z.string() })),
  }),
]);

/** Schema of a whole history (items only; {@link parseHistory} also checks pairing). */
export const historySchema = z.array(historyItemSchema);

function where(path: ReadonlyArray<PropertyKey>): string {
  let s = 'history';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : `.${String(p)}`;
  return s;
}

/**
 * Checks that `value` is a model history and returns it (the same array,
 * typed). Besides the schema: tool-call ids are unique, each call has at most
 * one result, and a result comes after its call. A result whose call is not
 * in the history (it was before a summary) is allowed. Throws
 * {@link BadArgumentsError} naming the first bad item.
 */
export function parseHistory(value: unknown): HistoryItem[] {
  const parsed = historySchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BadArgumentsError(`${where(issue?.path ?? [])}: ${issue?.message ?? 'invalid history'}`, {
      path: (issue?.path ?? []).map((p) => (typeof p === 'number' ? p : String(p))),
    });
  }
  // The parsed copy is only a verdict: callers keep their own objects (the
  // recent suffix must come back as the very same values).
  const items = value as HistoryItem[];
  const calls = new Set<string>();
  const results = new Set<string>();
  items.forEach((item, i) => {
    if (item.type === 'tool_call') {
      if (calls.has(item.callId)) {
        throw new BadArgumentsError(`history[${i}]: tool call id ${JSON.stringify(item.callId)} appears twice`, {
          index: i,
        });
      }
      if (results.has(item.callId)) {
        throw new BadArgumentsError(`history[${i}]: tool call ${JSON.stringify(item.callId)} comes after its result`, {
          index: i,
        });
      }
      calls.add(item.callId);
    } else if (item.type === 'tool_result') {
      if (results.has(item.callId)) {
        throw new BadArgumentsError(`history[${i}]: a second result for call ${JSON.stringify(item.callId)}`, {
          index: i,
        });
      }
      results.add(item.callId);
    }
  });
  return items;
}

/** A finished call as a host or the session log knows it. */
export interface FinishedCall {
  /** The tool name the model called. */
  tool: string;
  /** The arguments as the model sent them: an object, or its JSON text. */
  args: unknown;
  /** The engine's terminal result for that call. */
  result: TerminalResult;
}

function normalizedArgs(args: unknown, i: number): JsonObject | string {
  if (typeof args === 'string') return args;
  if (args === undefined) return {};
  let copy: unknown;
  try {
    copy = JSON.parse(JSON.stringify(args));
  } catch (err) {
    throw new BadArgumentsError(`calls[${i}].args cannot be represented as JSON: ${(err as Error).message}`);
  }
  if (!isJsonObject(copy)) {
    throw new BadArgumentsError(`calls[${i}].args must be an object or a JSON string, got ${JSON.stringify(copy)}`);
  }
  return copy;
}

function jsonCopy(v: unknown, what: string): JsonObject {
  let copy: unknown;
  try {
    copy = JSON.parse(JSON.stringify(v ?? {}));
  } catch (err) {
    throw new BadArgumentsError(`${what} cannot be represented as JSON: ${(err as Error).message}`);
  }
  if (!isJsonObject(copy)) throw new BadArgumentsError(`${what} must be an object`);
  return copy;
}

function outputCopy(o: OutputRef | null): OutputRef | null {
  if (o === null) return null;
  return cloneJson(o as unknown as JsonValue) as unknown as OutputRef;
}

/** The result item for a terminal result: a copy, JSON-normalised (e.g. `undefined` metadata values dropped). */
export function resultItem(result: TerminalResult, i = 0): ToolResultItem {
  const item: ToolResultItem = {
    type: 'tool_result',
    callId: result.callId,
    status: result.status,
    complete: result.complete,
    model: result.model,
    output: outputCopy(result.output),
    metadata: jsonCopy(result.metadata, `calls[${i}].result.metadata`),
    attachments: result.attachments.map((a) =>
      a.name === undefined
        ? { mediaType: a.mediaType, data: a.data }
        : { mediaType: a.mediaType, data: a.data, name: a.name },
    ),
    messages: result.messages.map((m) => ({ role: m.role, content: m.content })),
  };
  if (result.error) {
    const { code, message, details } = result.error;
    item.error =
      details === undefined
        ? { code, message }
        : { code, message, details: jsonCopy(details, `calls[${i}].result.error.details`) };
  }
  return item;
}

/**
 * History items for finished calls: for each, its tool call item then its
 * result item, in the order given. Copies everything (the items share nothing
 * with the inputs), keeps string arguments as they are, and validates the
 * outcome with {@link parseHistory}. Throws {@link BadArgumentsError} when a
 * call's `tool` differs from its result's, or arguments are not an object or
 * a JSON string.
 */
export function historyFromCalls(calls: ReadonlyArray<FinishedCall>): HistoryItem[] {
  const items: HistoryItem[] = [];
  calls.forEach((c, i) => {
    if (c.tool !== c.result.tool) {
      throw new BadArgumentsError(
        `calls[${i}]: tool ${JSON.stringify(c.tool)} does not match its result's tool ${JSON.stringify(c.result.tool)}`,
      );
    }
    items.push({ type: 'tool_call', callId: c.result.callId, tool: c.tool, args: normalizedArgs(c.args, i) });
    items.push(resultItem(c.result, i));
  });
  return parseHistory(items);
}
