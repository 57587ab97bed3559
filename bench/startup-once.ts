/** One cold start, timed from process start: engine open plus a first bash call (`true`). Prints ms. */
import { performance } from 'node:perf_hooks';
import { Engine } from '../engine/engine.js';

const store = process.argv[2] as string;
const engine = await Engine.open({ store });
const r = await engine.run('bash', { command: 'true' });
const ms = performance.now(); // since the process started (timeOrigin)
await engine.close();
process.stdout.write(`${JSON.stringify({ ms, status: r.status })}\n`);
