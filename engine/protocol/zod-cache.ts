/**
 * Loads the zod bundle from V8's code cache: `npm run build` bundles zod
 * into one CommonJS file, writes its code cache beside it
 * (generate/zod-cache.ts) and makes `zod.js` load it through
 * {@link loadCachedBundle}. Node 20 keeps no compile cache for ES modules,
 * and zod is the largest module every cold thread loads (docs/benchmarks.md,
 * "Cold start"). A cache V8 rejects is ignored: slower, never wrong.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Script } from 'node:vm';

/** A bundle loaded by {@link loadCachedBundle}. */
export interface LoadedBundle {
  readonly exports: Record<string, unknown>;
  /** The compiled script: generate/zod-cache.ts writes its cache once the schemas have run. */
  readonly script: Script;
  /** True when the code cache was read and V8 accepted it; false when it was missing or rejected. */
  readonly cacheAccepted: boolean;
}

/** Bundles loaded in this thread, by path (for the cache generator). */
const loaded = new Map<string, LoadedBundle>();

/**
 * Runs the CommonJS bundle at `bundlePath`, compiled with the code cache at
 * `cachePath` when V8 accepts it. Wrapped as Node wraps a CommonJS module, so
 * the same source gives the same cache whoever loads it.
 */
export function loadCachedBundle(bundlePath: string, cachePath: string): LoadedBundle {
  const source = readFileSync(bundlePath, 'utf8');
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(cachePath);
  } catch {
    // No cache (a build that did not write one): compiled from the source.
  }
  const script = new Script(`(function (exports, require, module) {${source}\n})`, {
    filename: bundlePath,
    ...(cachedData ? { cachedData } : {}),
  });
  const module = { exports: {} as Record<string, unknown> };
  (script.runInThisContext() as (e: unknown, r: NodeJS.Require, m: unknown) => void)(
    module.exports,
    createRequire(bundlePath),
    module,
  );
  const bundle = {
    exports: module.exports,
    script,
    cacheAccepted: cachedData !== undefined && !script.cachedDataRejected,
  };
  loaded.set(bundlePath, bundle);
  return bundle;
}

/** The bundle at `bundlePath` as this thread loaded it, if any. @internal for the cache generator */
export function loadedBundle(bundlePath: string): LoadedBundle | undefined {
  return loaded.get(bundlePath);
}
