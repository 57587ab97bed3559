/**
 * One cold start, timed from process start: engine open plus a first bash
 * call (`true`). Prints the total (`ms`, since the process started) and where
 * it went: Node's own start-up before this module runs, importing the engine
 * module, Engine.open, the first call; and the CPU time all of the
 * process's threads used by then (`cpuMs`), which a busy host moves less
 * than wall time.
 */
import { performance } from 'node:perf_hooks';

const boot = performance.now(); // since the process started (timeOrigin)
const { Engine } = await import('../engine/engine.js');
const imported = performance.now();
const store = process.argv[2] as string;
const engine = await Engine.open({ store });
const opened = performance.now();
const r = await engine.run('bash', { command: 'true' });
const ms = performance.now();
const usage = process.resourceUsage();
await engine.close();
const round = (n: number) => Math.round(n * 10) / 10;
process.stdout.write(
  `${JSON.stringify({
    ms,
    status: r.status,
    bootMs: round(boot),
    importMs: round(imported - boot),
    openMs: round(opened - imported),
    callMs: round(ms - opened),
    cpuMs: round((usage.userCPUTime + usage.systemCPUTime) / 1000),
  })}\n`,
);
