/**
 * A benchmark's targets in one shape, so that `npm run bench` can keep them
 * and bench/figures.ts can put every one in docs/benchmarks.md's table.
 * Each benchmark prints `targets` (a list of {@link Target}) and
 * `pass: passes(targets)`, built from the figures it measured.
 */
import { report } from './util.js';

/** How the figure must compare with the bound. */
export type Comparison = '<' | '<=' | '>=';

/**
 * What the figure counts: `x` a ratio against a baseline of the same run,
 * `check` a condition (figure 1 when it holds, 0 when not; bound 1).
 */
export type Unit = 'x' | 'ms' | 'MiB' | 'bytes' | 'calls/s' | 'calls' | 'requests' | 'check';

/** One target and how the run measured against it. */
export interface Target {
  /** `<bench>.<name>`, stable: the table's rows and anyone comparing runs key on it. */
  id: string;
  /** One line saying what is held to what, the bound included. */
  target: string;
  /** The figure measured (rounded as printed). */
  figure: number;
  op: Comparison;
  bound: number;
  unit: Unit;
  /** The comparison on the unrounded figure. */
  pass: boolean;
}

function compare(value: number, op: Comparison, bound: number): boolean {
  if (op === '<') return value < bound;
  if (op === '<=') return value <= bound;
  return value >= bound;
}

/**
 * A figure against a bound: `pass` compares `value` itself, `figure` is
 * `value` rounded to `digits` decimals (unrounded without `digits`).
 */
export function target(
  id: string,
  text: string,
  value: number,
  op: Comparison,
  bound: number,
  unit: Unit,
  digits?: number,
): Target {
  const figure = digits === undefined ? value : Math.round(value * 10 ** digits) / 10 ** digits;
  return { id, target: text, figure, op, bound, unit, pass: compare(value, op, bound) };
}

/** A condition the run must meet (equal digests, no failed call): figure 1 when it holds. */
export function check(id: string, text: string, holds: boolean): Target {
  return { id, target: text, figure: holds ? 1 : 0, op: '>=', bound: 1, unit: 'check', pass: holds };
}

/** Whether every target passed: a benchmark's `pass`. */
export function passes(targets: readonly Target[]): boolean {
  return targets.every((t) => t.pass);
}

/**
 * Runs the named parts of a benchmark that `which` lists, in order, and
 * reports their figures under their names with one list of targets.
 */
export async function reportParts(
  bench: string,
  which: ReadonlySet<string>,
  parts: Record<string, () => Promise<{ targets: Target[] }>>,
): Promise<void> {
  const out: Record<string, unknown> = { bench };
  const targets: Target[] = [];
  for (const [name, run] of Object.entries(parts)) {
    if (!which.has(name)) continue;
    const { targets: own, ...rest } = await run();
    out[name] = rest;
    targets.push(...own);
  }
  out.targets = targets;
  out.pass = passes(targets);
  return report(out);
}
