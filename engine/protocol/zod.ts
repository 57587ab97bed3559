/**
 * zod, as every module of sluice and tool authors (`sluice/tool`) import it:
 * one copy per thread. `npm run build` replaces the compiled file with a
 * module loading a single-file bundle of the same package from a V8 code
 * cache (zod-cache.ts), which a cold thread loads much sooner than zod's
 * many files (docs/benchmarks.md, "Cold start"); `tsc` alone leaves this
 * plain re-export: slower, never wrong.
 */
import { z } from 'zod';

export { z };
