/** A failed zod validation as one line: where, what, and the bad value quoted safely (a BigInt or a cycle must not throw). */
import type { z } from './zod.js';

/** Longest quoted value in a message. */
const QUOTE_MAX = 200;

/** `value` as a message shows it: JSON, cut, never throwing. */
export function quoteValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'bigint') return `${value}n`;
  // JSON would show NaN and Infinity as null.
  if (typeof value === 'number') return String(value);
  try {
    const s = JSON.stringify(value) ?? String(value);
    return s.length > QUOTE_MAX ? `${s.slice(0, QUOTE_MAX)}…` : s;
  } catch {
    return Array.isArray(value) ? '[…]' : typeof value === 'object' && value !== null ? '{…}' : String(value);
  }
}

/** The first issue of a failed validation of `input`. */
export interface FirstIssue {
  /** Dotted path of the bad field, '' for the input itself. */
  path: string;
  /** The path's first key ('' for the input itself). */
  key: string;
  message: string;
  /** `got <quoted value>`, or `missing` when there is no value at the path. */
  got: string;
}

/** Describes the first issue of `error`, found validating `input`. */
export function firstIssue(error: z.ZodError, input: unknown): FirstIssue {
  const issue = error.issues[0];
  const keys = issue?.path ?? [];
  let value: unknown = input;
  for (const k of keys) {
    value = value !== null && typeof value === 'object' ? (value as Record<PropertyKey, unknown>)[k] : undefined;
  }
  return {
    path: keys.map(String).join('.'),
    key: keys.length > 0 ? String(keys[0]) : '',
    message: issue?.message ?? 'invalid',
    got: value === undefined ? 'missing' : `got ${quoteValue(value)}`,
  };
}
