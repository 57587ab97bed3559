/**
 * The records of a session event log and their lenient, versionless
 * reading: unknown fields are dropped, every field a replay can do without
 * is optional with a default, and a record of an unknown type is counted
 * and skipped rather than failing the log. Writers write one layout
 * ({@link encodeCompleted}).
 */
import type { Attachment, EmittedMessage } from '../protocol/messages.js';
import { type SandboxPolicy, sandboxPolicySchema } from '../protocol/sandbox.js';
import { z } from '../protocol/zod.js';
import type { CallStatus, OutputRef, StreamRef, TerminalResult } from '../result.js';

/** Record type of a call that started. */
export const CALL_STARTED = 'call.started';
/** Record type of a call's terminal result. */
export const CALL_COMPLETED = 'call.completed';
/** Record type of a revert of the session to before one call. */
export const SESSION_REVERT = 'session.revert';

const DIGEST = /^[0-9a-f]{64}$/;
const digest = z.string().regex(DIGEST);
const count = z.number().int().nonnegative();

/** Where a record's oversized fields went: one blob holding `{ kind, fields: { name: value } }`. */
export interface SpillRef {
  digest: string;
  bytes: number;
  /** Names of the record fields stored in the blob. */
  fields: string[];
}

const spillSchema = z.object({ digest, bytes: count, fields: z.array(z.string()) });

/** A `call.started` record: what was called, with which arguments and output declaration. */
export interface StartedRecord {
  type: typeof CALL_STARTED;
  callId: string;
  tool: string;
  /** The arguments (absent when spilled). */
  args?: unknown;
  output?: unknown;
  at?: string;
  /** The sandbox policy the call runs under. */
  sandbox?: SandboxPolicy;
  spill?: SpillRef;
}

/** A `call.completed` record: the terminal result, minus nothing replay needs. */
export interface CompletedRecord {
  type: typeof CALL_COMPLETED;
  callId: string;
  tool?: string;
  status: CallStatus;
  complete?: boolean;
  display?: string;
  model?: string;
  /** The output references as written (parse with {@link parseOutputRef}). */
  output?: unknown;
  metadata?: Record<string, unknown>;
  attachments?: unknown[];
  messages?: unknown[];
  error?: { code: string; message: string; details?: Record<string, unknown> };
  /** Where the whole error message and final display are, when they were cut (GC roots while live). */
  fullText?: { error?: { digest: string; bytes: number }; display?: { digest: string; bytes: number } };
  /** The sandbox policy the call ran under. */
  sandbox?: SandboxPolicy;
  startedAt?: string;
  durationMs?: number;
  at?: string;
  spill?: SpillRef;
}

/** A `session.revert` record: the session is reverted to before call `before`. */
export interface RevertRecord {
  type: typeof SESSION_REVERT;
  before: string;
  at?: string;
}

/** Any record this version understands. */
export type SessionRecord = StartedRecord | CompletedRecord | RevertRecord;

const startedSchema = z.object({
  type: z.literal(CALL_STARTED),
  callId: z.string().min(1),
  tool: z.string().catch('unknown'),
  args: z.unknown().optional(),
  output: z.unknown().optional(),
  at: z.string().optional().catch(undefined),
  sandbox: sandboxPolicySchema.optional().catch(undefined),
  spill: spillSchema.optional().catch(undefined),
});

const textRefSchema = z.object({ digest, bytes: count });

/** Reads a `call.completed` record leniently: what replay can do without is optional, odd values fall back. */
const completedSchema = z.object({
  type: z.literal(CALL_COMPLETED),
  callId: z.string().min(1),
  tool: z.string().optional().catch(undefined),
  // A status from a future layout is not success: shown as failed.
  status: z.enum(['success', 'failed', 'cancelled']).catch('failed'),
  complete: z.boolean().optional().catch(undefined),
  display: z.string().optional().catch(undefined),
  model: z.string().optional().catch(undefined),
  output: z.unknown().optional(),
  metadata: z.record(z.string(), z.unknown()).optional().catch(undefined),
  attachments: z.array(z.unknown()).optional().catch(undefined),
  messages: z.array(z.unknown()).optional().catch(undefined),
  error: z
    .object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() })
    .optional()
    .catch(undefined),
  fullText: z
    .object({ error: textRefSchema.optional().catch(undefined), display: textRefSchema.optional().catch(undefined) })
    .optional()
    .catch(undefined),
  sandbox: sandboxPolicySchema.optional().catch(undefined),
  startedAt: z.string().optional().catch(undefined),
  durationMs: z.number().nonnegative().optional().catch(undefined),
  at: z.string().optional().catch(undefined),
  spill: spillSchema.optional().catch(undefined),
});

const revertSchema = z.object({
  type: z.literal(SESSION_REVERT),
  before: z.string().min(1),
  at: z.string().optional().catch(undefined),
});

/** The outcome of reading one checksummed line. */
export type ParsedLine = { kind: 'record'; record: SessionRecord } | { kind: 'unknown' } | { kind: 'invalid' };

/** Parses the JSON of one line whose checksum matched: `unknown` for a type this version does not know, `invalid` for one lacking what it cannot do without. */
export function parseRecord(json: string): ParsedLine {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return { kind: 'invalid' };
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return { kind: 'invalid' };
  const type = (raw as { type?: unknown }).type;
  const schema =
    type === CALL_STARTED
      ? startedSchema
      : type === CALL_COMPLETED
        ? completedSchema
        : type === SESSION_REVERT
          ? revertSchema
          : undefined;
  if (!schema) return { kind: 'unknown' };
  const parsed = schema.safeParse(raw);
  return parsed.success ? { kind: 'record', record: parsed.data as SessionRecord } : { kind: 'invalid' };
}

const streamSchema = z.object({
  name: z.string(),
  digest,
  bytes: count.catch(0),
  lines: count.catch(0),
  truncated: z.boolean().catch(false),
});
const outputSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('single'),
    digest,
    bytes: count.catch(0),
    lines: count.catch(0),
    truncated: z.boolean().catch(false),
  }),
  z.object({ kind: z.literal('streams'), manifest: digest, streams: z.array(streamSchema).catch([]) }),
  z.object({ kind: z.literal('page'), bytes: count.catch(0), lines: count.catch(0) }),
]);

/** The output references of a completed record, or null when absent or unreadable. */
export function parseOutputRef(raw: unknown): OutputRef | null {
  const r = outputSchema.safeParse(raw);
  if (!r.success) return null;
  const o = r.data;
  if (o.kind === 'streams') return { kind: 'streams', manifest: o.manifest, streams: o.streams as StreamRef[] };
  return o;
}

/** Every digest a value mentions, at any depth: GC roots survive in a record whose shape this version does not know. */
export function digestsIn(value: unknown, into: Set<string> = new Set(), depth = 0): Set<string> {
  if (typeof value === 'string') {
    if (DIGEST.test(value)) into.add(value);
  } else if (value !== null && typeof value === 'object' && depth < 8) {
    for (const v of Array.isArray(value) ? value : Object.values(value)) digestsIn(v, into, depth + 1);
  }
  return into;
}

/** Attachments of a record that have the current shape (others are dropped). */
export function validAttachments(list: unknown[] | undefined): Attachment[] {
  const schema = z.object({ mediaType: z.string(), data: z.string(), name: z.string().optional() });
  return (list ?? []).flatMap((a) => {
    const r = schema.safeParse(a);
    return r.success ? [r.data as Attachment] : [];
  });
}

/** Emitted messages of a record that have the current shape (others are dropped). */
export function validMessages(list: unknown[] | undefined): EmittedMessage[] {
  const schema = z.object({ role: z.enum(['user', 'system']), content: z.string() });
  return (list ?? []).flatMap((m) => {
    const r = schema.safeParse(m);
    return r.success ? [r.data] : [];
  });
}

/** The `call.completed` record for a terminal result (before spilling). */
export function encodeCompleted(result: TerminalResult, at: string): CompletedRecord {
  const rec: CompletedRecord = {
    type: CALL_COMPLETED,
    callId: result.callId,
    tool: result.tool,
    status: result.status,
    complete: result.complete,
    display: result.display,
    model: result.model,
    output: result.output,
    metadata: result.metadata,
    attachments: result.attachments,
    messages: result.messages,
    startedAt: result.startedAt,
    durationMs: result.durationMs,
    at,
  };
  if (result.error) rec.error = result.error;
  if (result.fullText) rec.fullText = result.fullText;
  if (result.sandbox) rec.sandbox = result.sandbox;
  return rec;
}

/** The reading schemas of the record types, which engine/wire/schemas.ts composes into the published contract instead of restating them. */
export {
  completedSchema as completedRecordSchema,
  revertSchema as revertRecordSchema,
  spillSchema as spillRefSchema,
  startedSchema as startedRecordSchema,
};
