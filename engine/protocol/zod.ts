/**
 * zod, as every module of sluice imports it, and tool authors through
 * `sluice/tool`: one copy per thread. In the sources this re-exports the zod
 * package. `npm run build` then replaces the compiled file with a single-file
 * bundle of that same package (rolldown): zod's ~95 module files cost a cold
 * thread about twice the time one file with the same code does, ~50 ms on
 * each of the two threads a cold start waits for (docs/benchmarks.md, target
 * 6). Compiled by `tsc` alone it stays a plain re-export: slower, never wrong.
 */
import { z } from 'zod';

export { z };
