/**
 * zod, as every module of sluice imports it, and tool authors through
 * `sluice/tool`: one copy per thread. In the sources this re-exports the zod
 * package. `npm run build` then replaces the compiled file with a module that
 * loads a single-file CommonJS bundle of that same package (rolldown),
 * compiled from the V8 code cache the build writes beside it
 * (engine/protocol/zod-cache.ts): zod's ~95 module files cost a cold thread
 * about twice the time one file with the same code does, and the cache takes
 * another ~15-40 ms off each thread a cold start waits for
 * (docs/benchmarks.md, "Cold start"). Compiled by `tsc` alone it stays a plain
 * re-export: slower, never wrong.
 */
import { z } from 'zod';

export { z };
