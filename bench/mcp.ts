/**
 * MCP adapter costs, against a baseline measured in the same run: the SDK's
 * own client on this thread talking to the same fixture server over stdio
 * (no workers, no capture). Prints:
 *
 * - connect: starting a server and the MCP handshake, against one warm call:
 *   what a design with a connection per pool thread would pay per thread (and
 *   again whenever piscina recycles an idle thread); sluice pays it once per
 *   server on its dedicated MCP host thread;
 * - warm call and 1 MB result: engine (worker, approval, host-thread hop,
 *   capture, publication) against the bare client, and a warm MCP call
 *   against a warm plugin call through the same engine path;
 * - concurrency: N slow calls at once through the one connection, against one
 *   slow call: the shared connection does not serialise calls.
 *
 *   SLUICE_BENCH_RUNS (default 20), SLUICE_BENCH_CONCURRENCY (default 8)
 */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Engine } from '../engine/engine.js';
import { passes, target } from './targets.js';
import { envInt, median, report, tempDir } from './util.js';

const RUNS = envInt('SLUICE_BENCH_RUNS', 20);
const CONCURRENCY = envInt('SLUICE_BENCH_CONCURRENCY', 8);
const MB = 1_000_000;
const SLOW_MS = 300;
const here = fileURLToPath(new URL('.', import.meta.url));
// Compiled into dist/bench/, run from there: the fixture lives in the sources.
const SERVER = resolve(here, '..', '..', 'test', 'fixtures', 'mcp-server.mjs');
const ARGS = [SERVER, 'sluice-bench-mcp'];
const ECHO_PLUGIN = resolve(here, '..', '..', 'test', 'fixtures', 'tools', 'echo.mjs');

async function timed<T>(fn: () => Promise<T>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

async function repeat(n: number, fn: () => Promise<unknown>): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) xs.push(await timed(fn));
  return median(xs);
}

async function baseline(): Promise<Record<string, number>> {
  const client = new Client({ name: 'bench', version: '1' });
  const connectMs = await timed(() =>
    client.connect(new StdioClientTransport({ command: process.execPath, args: ARGS, stderr: 'ignore' })),
  );
  await client.callTool({ name: 'echo', arguments: { text: 'warm' } });
  const callMs = await repeat(RUNS, () => client.callTool({ name: 'echo', arguments: { text: 'x' } }));
  const bigMs = await repeat(Math.max(3, RUNS / 4), () => client.callTool({ name: 'big', arguments: { bytes: MB } }));
  const slowMs = await timed(() => client.callTool({ name: 'slow', arguments: { ms: SLOW_MS } }));
  await client.close();
  return { connectMs, callMs, bigMs, slowMs };
}

async function engine(): Promise<Record<string, number>> {
  const { dir, remove } = tempDir('sluice-bench-mcp-');
  const e = await Engine.open({ store: `${dir}/store`, cwd: dir });
  try {
    const connectMs = await timed(() => e.addMcpServer({ name: 'fx', command: process.execPath, args: ARGS }));
    await e.run('fx.echo', { text: 'warm' });
    const callMs = await repeat(RUNS, () => e.run('fx.echo', { text: 'x' }));
    const bigMs = await repeat(Math.max(3, RUNS / 4), () => e.run('fx.big', { bytes: MB }));
    // The same call path without MCP: a plugin that writes its argument.
    await e.register(ECHO_PLUGIN);
    await e.run('echo', { text: 'warm' });
    const pluginCallMs = await repeat(RUNS, () => e.run('echo', { text: 'x' }));
    const slowMs = await timed(() => e.run('fx.slow', { ms: SLOW_MS }));
    const batch = () => Promise.all(Array.from({ length: CONCURRENCY }, () => e.run('fx.slow', { ms: SLOW_MS })));
    // The first batch also starts the pool threads; the second measures the connection.
    await batch();
    const concurrentMs = await timed(batch);
    return { connectMs, callMs, pluginCallMs, bigMs, slowMs, concurrentMs };
  } finally {
    await e.close();
    remove();
  }
}

const base = await baseline();
const sluice = await engine();
const r2 = (x: number) => Math.round(x * 100) / 100;
const concurrencyRatio = r2((sluice.concurrentMs as number) / (sluice.slowMs as number));
const targets = [
  target(
    'mcp.concurrency',
    `${CONCURRENCY} slow MCP calls through one connection < 3× the time of one (the connection does not serialise them)`,
    concurrencyRatio,
    '<',
    3,
    'x',
  ),
];
report({
  bench: 'mcp',
  baseline: Object.fromEntries(Object.entries(base).map(([k, v]) => [k, r2(v)])),
  sluice: Object.fromEntries(Object.entries(sluice).map(([k, v]) => [k, r2(v)])),
  // How many warm calls one server start costs: what each extra connection would add.
  connectInWarmCalls: r2((base.connectMs as number) / (base.callMs as number)),
  callOverhead: r2((sluice.callMs as number) / (base.callMs as number)),
  // An MCP call against a plugin call through the same engine path: the cost of the host-thread hop and the server.
  callVsPlugin: r2((sluice.callMs as number) / (sluice.pluginCallMs as number)),
  bigOverhead: r2((sluice.bigMs as number) / (base.bigMs as number)),
  concurrency: CONCURRENCY,
  concurrencyRatio,
  targets,
  pass: passes(targets),
});
