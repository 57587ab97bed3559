/** One batch input item, checked: whatever is wrong with it becomes a per-item EBADARGS, never an exception that ends the batch. */
import { BadArgumentsError, type SluiceError } from '../protocol/errors.js';

/** One call of a batch. */
export interface BatchCall {
  /** Unique within the batch; also the call's id (`callId`), so a resumed batch finds it in its session. */
  id: string;
  /** A registered tool's name. */
  tool: string;
  /** The tool's arguments. @default {} */
  args?: unknown;
  /** The session this call is recorded in. @default the batch's `session` option */
  session?: string;
  /** Narrows the engine's sandbox for this call (CallOptions.sandbox); checked when the call starts. */
  sandbox?: unknown;
}

/** A batch id: a letter or digit, then up to 127 of `[A-Za-z0-9._:-]`; a safe integer stands for its decimal form. */
export const BATCH_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** The keys an item may have. */
const KEYS = new Set(['id', 'tool', 'args', 'session', 'sandbox']);

/** A line longer than the reader's bound, reported without ever being held whole. */
export class OversizeLine {
  /** `bytes`: how long the line was; `bound`: the most bytes a line may have. */
  constructor(
    readonly bytes: number,
    readonly bound: number,
  ) {}
}

/** What an input item turned out to be. */
export type ParsedItem =
  | { kind: 'blank' }
  | { kind: 'call'; call: BatchCall }
  | { kind: 'bad'; id: string | null; error: SluiceError };

function quote(v: unknown): string {
  const s = typeof v === 'string' ? JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v) : typeof v;
  return s;
}

/** Checks one item: a string is parsed as a JSON line (a blank line is skipped), an object is checked as is. */
export function parseItem(value: unknown): ParsedItem {
  if (value instanceof OversizeLine) {
    const error = new BadArgumentsError(
      `the line is ${value.bytes} bytes, over the bound of ${value.bound} bytes on one batch line`,
      { bytes: value.bytes, bound: value.bound },
    );
    return { kind: 'bad', id: null, error };
  }
  let item: unknown = value;
  if (typeof value === 'string') {
    if (value.trim() === '') return { kind: 'blank' };
    try {
      item = JSON.parse(value);
    } catch (err) {
      return { kind: 'bad', id: null, error: new BadArgumentsError(`not JSON: ${(err as Error).message}`) };
    }
  }
  if (typeof item !== 'object' || item === null || Array.isArray(item)) {
    return {
      kind: 'bad',
      id: null,
      error: new BadArgumentsError(`a batch line is an object { id, tool, args?, session? }, not ${describe(item)}`),
    };
  }
  const o = item as Record<string, unknown>;
  const rawId = o.id;
  const id =
    typeof rawId === 'string' ? rawId : Number.isSafeInteger(rawId) && (rawId as number) >= 0 ? String(rawId) : null;
  const bad = (message: string) => ({
    kind: 'bad' as const,
    id: id !== null && BATCH_ID.test(id) ? id : null,
    error: new BadArgumentsError(message),
  });
  if (id === null || !BATCH_ID.test(id)) {
    return bad(`id must be a string matching ${BATCH_ID} or a non-negative integer, got ${quote(rawId)}`);
  }
  const unknown = Object.keys(o).filter((k) => !KEYS.has(k));
  if (unknown.length > 0) {
    return bad(
      `unknown field ${unknown.map((k) => JSON.stringify(k.slice(0, 40))).join(', ')} (a line has id, tool, args, session, sandbox)`,
    );
  }
  if (typeof o.tool !== 'string' || o.tool === '') return bad(`tool must be a tool name, got ${quote(o.tool)}`);
  if (o.session !== undefined && typeof o.session !== 'string') {
    return bad(`session must be a session id, got ${quote(o.session)}`);
  }
  const call: BatchCall = { id, tool: o.tool, args: o.args ?? {} };
  if (o.session !== undefined) call.session = o.session as string;
  if (o.sandbox !== undefined) call.sandbox = o.sandbox;
  return { kind: 'call', call };
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'string' ? 'a string' : `a ${typeof v}`;
}
