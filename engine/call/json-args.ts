/**
 * Tool arguments are JSON: recorded and replayed as JSON, sent as JSON by
 * models and HTTP clients. A value JSON cannot carry faithfully (a function,
 * a BigInt, NaN, a class instance, a cycle, nesting past {@link MAX_ARGS_DEPTH})
 * is refused up front with EBADARGS rather than failing later as a worker
 * crash, a disk error or a result replay cannot reproduce.
 */
import { BadArgumentsError } from '../protocol/errors.js';

/** Deepest nesting of arrays and objects accepted in tool arguments. */
export const MAX_ARGS_DEPTH = 256;

function describe(v: unknown): string {
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'symbol') return 'a symbol';
  if (typeof v === 'bigint') return 'a BigInt';
  if (typeof v === 'number') return String(v);
  const proto = Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null;
  return `an instance of ${proto?.constructor?.name ?? 'an unknown class'}`;
}

/** Why `args` is not plain JSON (with the path of the offending value), or undefined when it is. */
export function jsonArgsProblem(args: unknown): string | undefined {
  const ancestors = new Set<object>();
  const visit = (v: unknown, path: string, depth: number): string | undefined => {
    if (v === null || v === undefined || typeof v === 'string' || typeof v === 'boolean') return undefined;
    if (typeof v === 'number') return Number.isFinite(v) ? undefined : `${path} is ${describe(v)}, not a JSON number`;
    if (typeof v !== 'object') return `${path} is ${describe(v)}, which JSON cannot carry`;
    if (depth >= MAX_ARGS_DEPTH) return `${path} is nested deeper than ${MAX_ARGS_DEPTH} levels`;
    if (ancestors.has(v)) return `${path} refers back to itself (a cycle)`;
    const isArray = Array.isArray(v);
    const proto = Object.getPrototypeOf(v);
    if (!isArray && proto !== Object.prototype && proto !== null) {
      return `${path} is ${describe(v)}, not a plain object`;
    }
    ancestors.add(v);
    try {
      if (isArray) {
        for (let i = 0; i < v.length; i++) {
          const p = visit(v[i], `${path}[${i}]`, depth + 1);
          if (p) return p;
        }
      } else {
        for (const key of Object.keys(v)) {
          const p = visit((v as Record<string, unknown>)[key], `${path}.${key}`, depth + 1);
          if (p) return p;
        }
      }
    } finally {
      ancestors.delete(v);
    }
    return undefined;
  };
  return visit(args, 'arguments', 0);
}

/** Throws {@link BadArgumentsError} (EBADARGS) when `args` is not plain JSON. */
export function assertJsonArgs(tool: string, args: unknown): void {
  const problem = jsonArgsProblem(args);
  if (problem) throw new BadArgumentsError(`invalid arguments for ${tool}: ${problem}`, { tool });
}
