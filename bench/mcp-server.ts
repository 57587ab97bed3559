/**
 * `sluice mcp` costs, each against a baseline measured in the same run:
 *
 * - latency: `tools/call` of a no-op bash (`:`) through `sluice mcp` (a
 *   real process, the SDK's client over stdio), against the same call
 *   through an engine in this process, on the same kind of store and
 *   recorded in a session as the server records it: the median difference is
 *   what the MCP layer (JSON-RPC framing, the pipe, the result mapping)
 *   adds to a call;
 * - memory: one upstream result of N MiB of text through the gateway
 *   (`sluice mcp --mcp` in front of the hand-written fixture server, its
 *   `stream` tool, which writes the one JSON-RPC message a piece at a time:
 *   1 GiB is more than a JavaScript string can hold), against the gateway's
 *   RSS before the call: the growth of its peak RSS.
 *
 *   SLUICE_BENCH_RUNS (default 40), SLUICE_BENCH_GATEWAY_MIB (default 1024)
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Engine } from '../engine/engine.js';
import { passes, target } from './targets.js';
import { envInt, median, report, tempDir } from './util.js';

const RUNS = envInt('SLUICE_BENCH_RUNS', 40);
const GATEWAY_MIB = envInt('SLUICE_BENCH_GATEWAY_MIB', 1024);
const MiB = 1024 * 1024;
const here = fileURLToPath(new URL('.', import.meta.url));
// Compiled into dist/bench/: the CLI is beside it, the fixture lives in the sources.
const MAIN = resolve(here, '..', 'cli', 'main.js');
const SERVER = resolve(here, '..', '..', 'test', 'fixtures', 'mcp-raw-server.mjs');
const NOOP = { command: ':' };

async function timedRuns(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    xs.push(performance.now() - t);
  }
  return xs;
}

async function connect(dir: string, args: string[]): Promise<{ client: Client; pid: number }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MAIN, 'mcp', '--store', join(dir, 'store'), ...args],
    cwd: dir,
    stderr: 'ignore',
  });
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(transport);
  return { client, pid: transport.pid as number };
}

function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1]);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

/** The same no-op call, in process and through sluice mcp, alternating so both see the same machine. */
async function latency(): Promise<{ engineMs: number; mcpMs: number }> {
  const a = tempDir('sluice-bench-mcps-');
  const b = tempDir('sluice-bench-mcps-');
  const engine = await Engine.open({ store: join(a.dir, 'store'), cwd: a.dir });
  const { client } = await connect(b.dir, ['--session', 'bench']);
  try {
    for (let i = 0; i < 10; i++) {
      await engine.run('bash', NOOP, { session: 'bench' });
      await client.callTool({ name: 'bash', arguments: NOOP });
    }
    const inProcess: number[] = [];
    const overMcp: number[] = [];
    for (let round = 0; round < 4; round++) {
      inProcess.push(...(await timedRuns(RUNS / 4, () => engine.run('bash', NOOP, { session: 'bench' }))));
      overMcp.push(...(await timedRuns(RUNS / 4, () => client.callTool({ name: 'bash', arguments: NOOP }))));
    }
    return { engineMs: median(inProcess), mcpMs: median(overMcp) };
  } finally {
    await client.close();
    await engine.close();
    a.remove();
    b.remove();
  }
}

/** One upstream result through the gateway, and the gateway's peak RSS growth. */
async function gateway(): Promise<{ bytes: number; growthMiB: number; ms: number }> {
  const d = tempDir('sluice-bench-mcpg-');
  const { client, pid } = await connect(d.dir, ['--mcp', `fx=${process.execPath} ${SERVER} sluice-bench-gateway`]);
  try {
    await client.callTool({ name: 'fx.stream', arguments: { bytes: 1000 } });
    const before = memoryMiB(pid);
    const bytes = GATEWAY_MIB * MiB;
    const t = performance.now();
    // No SDK timeout (60 s by default): on a loaded machine 1 GiB takes longer.
    const r = await client.callTool({ name: 'fx.stream', arguments: { bytes } }, undefined, { timeout: 3_600_000 });
    const ms = performance.now() - t;
    const out = (r.structuredContent as { output: { bytes: number } }).output;
    if (r.isError || out.bytes !== bytes) throw new Error(`the call failed: ${JSON.stringify(r).slice(0, 300)}`);
    const after = memoryMiB(pid);
    return { bytes, growthMiB: Math.max(0, after.peak - before.rss), ms };
  } finally {
    await client.close();
    d.remove();
  }
}

const r2 = (x: number) => Math.round(x * 100) / 100;
const lat = await latency();
const gw = await gateway();
const overheadMs = lat.mcpMs - lat.engineMs;
const targets = [
  target(
    'mcp-server.latency',
    'a no-op bash through sluice mcp (SDK client over stdio) adds <= 2 ms median to the same call in process',
    overheadMs,
    '<=',
    2,
    'ms',
    2,
  ),
  target(
    'mcp-server.gateway-rss',
    `one upstream result of ${GATEWAY_MIB} MiB of text through the gateway grows its peak RSS <= 64 MiB`,
    gw.growthMiB,
    '<=',
    64,
    'MiB',
    1,
  ),
];
report({
  bench: 'mcp-server',
  runs: RUNS,
  engineMs: r2(lat.engineMs),
  mcpMs: r2(lat.mcpMs),
  overheadMs: r2(overheadMs),
  ratio: r2(lat.mcpMs / lat.engineMs),
  gateway: {
    mib: GATEWAY_MIB,
    growthMiB: r2(gw.growthMiB),
    mibPerSecond: r2(gw.bytes / MiB / (gw.ms / 1000)),
  },
  targets,
  pass: passes(targets),
});
