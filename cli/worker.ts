/**
 * `sluice worker --queue URL [--store DIR|s3://…] [--concurrency N]
 * [--config FILE] [--listen [HOST:]PORT] ...`: a farm worker
 * (docs/farm.md). It takes calls from the queue and runs them on its own
 * engine until SIGTERM, SIGINT or SIGHUP, then drains: it takes nothing
 * more, lets running calls finish and records them; calls still running
 * after --drain-ms are handed back to the queue (another worker runs them)
 * and cancelled here. Nothing is lost either way; exit 0.
 */
import { Engine } from '../engine/engine.js';
import { FarmQueue } from '../engine/farm/queue.js';
import { parseQueueUrl, QUEUE_ENV } from '../engine/farm/queue-url.js';
import { FarmWorker } from '../engine/farm/worker.js';
import { sanitizeForTerminal } from '../engine/presentation/sanitize.js';
import { BadArgumentsError, toSluiceError } from '../engine/protocol/errors.js';
import { loadOrCreateToken } from '../server/auth.js';
import { exposeFarmWorker } from '../server/metrics.js';
import { DEFAULT_HOST, startServer } from '../server/server.js';
import {
  type Command,
  EXIT_OK,
  HELP_OPTION,
  LIMIT_OPTIONS,
  parseCommandLine,
  parseCount,
  RUN_CONFIG_OPTIONS,
  STORE_OPTION,
  stopSignals,
  writeOut,
} from './common.js';
import { applyConfig, loadRunConfig } from './config.js';

/** How long a drain lets running calls finish before handing them back, by default. */
const DEFAULT_DRAIN_MS = 30_000;

const USAGE = `Usage: sluice worker --queue URL [--store DIR] [--concurrency N] [--name ID]
                     [--drain-ms N] [--listen [HOST:]PORT] [--config FILE] [--plugin PATH]...
                     [--mcp NAME=COMMAND]... [--sandbox MODE] [--network MODE]
                     [--max-lines N] [--max-bytes N]

Runs a farm's calls (docs/farm.md): takes them from the queue at URL and runs
them on this host's engine, with its own concurrency, tools and sandbox
policy; records each in its batch's session in the store and its result in
the queue (the first result of an item stands), acknowledging the item only
once both are durable. A call naming a tool this worker lacks gets a failed
result (EUNKNOWNTOOL). Every worker of a farm uses the same store (s3://...).

  --queue URL     nats://host:port/NAME (default: $${QUEUE_ENV})
  --store DIR     the store (default: $SLUICE_STORE, else ./.sluice); s3://bucket/prefix on a farm
  --concurrency N calls running at once, at most 1024 (default max(16, 2 x cores))
  --name ID       this worker's name in the results it records (default host:pid)
  --drain-ms N    on SIGTERM, how long running calls may finish before they are
                  handed back to the queue (default ${DEFAULT_DRAIN_MS})
  --listen [HOST:]PORT
                  also serve the HTTP API, /v1/metrics with the worker's load
                  (sluice_farm_*); HOST defaults to ${DEFAULT_HOST}
  --config FILE   JSON: { "mcpServers": {...}, "plugins": [PATH], "toolOutput": {...},
                  "concurrency", "sandbox" } (the flags override it)
  --plugin PATH   register a plugin tool module (repeatable)
  --mcp NAME=COMMAND [ARGS]
                  start an MCP server over stdio; its tools are NAME.<tool> (repeatable)
  --sandbox MODE  run tools' processes under bubblewrap: workspace-write, read-only, or off
  --network MODE  off (a loopback of its own; the default in a sandbox) or on
  --max-lines N   lines of each stream's preview in the model view (default 2000)
  --max-bytes N   UTF-8 bytes of each stream's preview (default 51200)

SIGTERM, SIGINT or SIGHUP drains: no item is taken any more, running calls
finish and are recorded (or are handed back after --drain-ms); exit 0. A second
signal exits at once (its items go to other workers when their leases end).
`;

const OPTIONS = {
  queue: { type: 'string' },
  name: { type: 'string' },
  'drain-ms': { type: 'string' },
  listen: { type: 'string' },
  ...RUN_CONFIG_OPTIONS,
  ...LIMIT_OPTIONS,
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

/** `[HOST:]PORT` of --listen. */
function parseListen(text: string): { host: string; port: number } {
  const colon = text.lastIndexOf(':');
  const host = colon === -1 ? DEFAULT_HOST : text.slice(0, colon);
  const port = parseCount('listen', colon === -1 ? text : text.slice(colon + 1)) as number;
  if (host === '' || port > 65535)
    throw new BadArgumentsError(`--listen takes [HOST:]PORT, got ${JSON.stringify(text)}`);
  return { host, port };
}

/** The `worker` command. */
export const command: Command = {
  summary: "run a farm's calls from a queue on this host's engine until SIGTERM (then drain)",
  usage: USAGE,
  options: OPTIONS,
  positionals: [],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'worker');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length > 0) {
      throw new BadArgumentsError(`sluice worker takes no positional arguments, got ${JSON.stringify(positionals[0])}`);
    }
    const url = values.queue ?? ctx.env[QUEUE_ENV];
    if (!url) throw new BadArgumentsError(`sluice worker needs --queue URL (or $${QUEUE_ENV})`);
    const address = parseQueueUrl(url);
    const drainMs = parseCount('drain-ms', values['drain-ms']) ?? DEFAULT_DRAIN_MS;
    const listen = values.listen === undefined ? undefined : parseListen(values.listen);
    const extra = await loadRunConfig(values, process.cwd());
    const signals = stopSignals();
    const engine = await Engine.open({ ...extra.engine, ...(values.store ? { store: values.store } : {}) });
    let queue: FarmQueue | undefined;
    try {
      await applyConfig(engine, extra);
      queue = await FarmQueue.open(address, values.name === undefined ? {} : { worker: values.name });
      let lastError = '';
      const worker = new FarmWorker(engine, queue, {
        onError: (err) => {
          // One line per kind of trouble, not one per retry while the server restarts.
          const e = toSluiceError(err, 'EPROTOCOL');
          const line = `sluice worker: queue: ${e.code}: ${sanitizeForTerminal(e.message)}`;
          if (line !== lastError) ctx.stderr.write(`${line}\n`);
          lastError = line;
        },
      });
      const server = listen ? await serveMetrics(engine, worker, listen) : undefined;
      const running = worker.run();
      await writeOut(
        ctx.stdout,
        `sluice worker: ${queue.worker} taking from ${address.display} (store ${engine.store.root}${server ? `, serving ${server.url}` : ''})\n`,
      );
      const sig = await Promise.race([signals.first, running.then(() => undefined)]);
      if (sig) ctx.stderr.write(`sluice worker: ${sig}: draining (${worker.load.running} running)\n`);
      await worker.stop(drainMs);
      await server?.close();
      const l = worker.load;
      ctx.stderr.write(
        `sluice worker: stopped: ${l.completed} recorded (${l.failed} not success), ${l.fenced} fenced, ${l.released} handed back\n`,
      );
    } finally {
      signals.dispose();
      await queue?.close();
      await engine.close();
    }
    return EXIT_OK;
  },
};

async function serveMetrics(engine: Engine, worker: FarmWorker, at: { host: string; port: number }) {
  exposeFarmWorker(engine, () => worker.load);
  const token = await loadOrCreateToken(engine.store.root);
  return startServer(engine, { token: token.token, host: at.host, port: at.port });
}
