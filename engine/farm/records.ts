/**
 * What a farm queue carries: a call to run (small: tool, arguments,
 * options) and a result that refers to the output rather than holding it
 * (status, the output's artifact URI, who ran it, in how many attempts).
 * The output itself is in the shared store; the queue stays small whatever
 * the tools print. Both are JSON with a byte bound, checked when written
 * and validated when read (another host wrote them).
 */
import { ProtocolError, ResourceLimitError } from '../protocol/errors.js';
import { z } from '../protocol/zod.js';

/** Largest encoded call (UTF-8 JSON bytes): a call is a tool name, its arguments and options, never data to process. */
export const MAX_CALL_BYTES = 64 * 1024;
/** Largest encoded result: references and a bounded error message, never output. */
export const MAX_RESULT_BYTES = 16 * 1024;
/** Longest error message a result keeps, in characters. */
export const MAX_RESULT_MESSAGE = 4096;

/** A call submitted to a farm: what a worker needs to run it on its own engine. */
export interface FarmCall {
  /** The tool's registered name (the worker's registry resolves it). */
  readonly tool: string;
  /** The tool's arguments, as JSON. */
  readonly args: unknown;
  /** The session the batch records into. */
  readonly session?: string;
  /** Per-call options the worker honours (timeout, sandbox narrowing, ...), as JSON. */
  readonly options?: Readonly<Record<string, unknown>>;
}

/** How an item ended, as recorded: a call's status, or `failed` when no worker finished it within its attempts. */
export type FarmStatus = 'success' | 'failed' | 'cancelled';

/** A recorded result: references only. */
export interface FarmResult {
  readonly status: FarmStatus;
  /** Who recorded it (a worker's name, e.g. `host:pid`). */
  readonly worker: string;
  /** Deliveries the item took, this one included; 0 for an item its submitter cancelled before any worker took it. */
  readonly attempts: number;
  /** The call's id on the worker's engine. */
  readonly callId?: string;
  /** The `artifact://` URI of the call's output manifest in the shared store, or null when none was published. */
  readonly output?: string | null;
  /** Why it did not succeed. */
  readonly error?: { readonly code: string; readonly message: string };
  /** Milliseconds the call ran on its worker. */
  readonly durationMs?: number;
  /** Bytes of the published output, every stream (for a submitter's progress). */
  readonly bytes?: number;
}

const callSchema = z.strictObject({
  tool: z.string().min(1).max(256),
  args: z.unknown(),
  session: z.string().max(256).optional(),
  options: z.record(z.string(), z.unknown()).optional(),
});

/** The zod schema of a {@link FarmResult} (the wire schemas compose it into a batch result). */
export const farmResultSchema = z.strictObject({
  status: z.enum(['success', 'failed', 'cancelled']),
  worker: z.string().min(1).max(256),
  attempts: z.number().int().min(0),
  callId: z.string().max(256).optional(),
  output: z.string().max(1024).nullable().optional(),
  error: z.strictObject({ code: z.string().max(64), message: z.string().max(MAX_RESULT_MESSAGE) }).optional(),
  durationMs: z.number().nonnegative().optional(),
  bytes: z.number().int().nonnegative().optional(),
});

function encode(what: string, value: unknown, bound: number): Uint8Array {
  const bytes = Buffer.from(JSON.stringify(value), 'utf8');
  if (bytes.length > bound) {
    throw new ResourceLimitError(`a farm ${what} of ${bytes.length} bytes is over its bound of ${bound} bytes`, {
      bytes: bytes.length,
      limit: bound,
    });
  }
  return bytes;
}

function decode<T>(what: string, schema: z.ZodType<T>, data: Uint8Array, subject: string): T {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
  } catch {
    throw new ProtocolError(`the farm ${what} on ${subject} is not JSON`, { subject });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new ProtocolError(`the farm ${what} on ${subject} is not valid: ${parsed.error.issues[0]?.message}`, {
      subject,
    });
  }
  return parsed.data;
}

/** The wire form of `call`; ERESOURCELIMIT over {@link MAX_CALL_BYTES}, EPROTOCOL when it is not a call. */
export function encodeCall(call: FarmCall): Uint8Array {
  const parsed = callSchema.safeParse(call);
  if (!parsed.success) throw new ProtocolError(`not a farm call: ${parsed.error.issues[0]?.message}`);
  return encode('call', call, MAX_CALL_BYTES);
}

/** The result `result` with a message cut to {@link MAX_RESULT_MESSAGE}, in its wire form (ERESOURCELIMIT over the bound). */
export function encodeResult(result: FarmResult): Uint8Array {
  const cut =
    result.error && result.error.message.length > MAX_RESULT_MESSAGE
      ? { ...result, error: { ...result.error, message: result.error.message.slice(0, MAX_RESULT_MESSAGE) } }
      : result;
  const parsed = farmResultSchema.safeParse(cut);
  if (!parsed.success) throw new ProtocolError(`not a farm result: ${parsed.error.issues[0]?.message}`);
  return encode('result', cut, MAX_RESULT_BYTES);
}

/** A call read from the queue (EPROTOCOL when another host wrote something else). */
export const decodeCall = (data: Uint8Array, subject: string): FarmCall => decode('call', callSchema, data, subject);

/** A result read from the queue (EPROTOCOL when another host wrote something else). */
export const decodeResult = (data: Uint8Array, subject: string): FarmResult =>
  decode('result', farmResultSchema, data, subject) as FarmResult;
