/**
 * `sluice batch <calls.jsonl | -> [--concurrency N] [--session ID] [--ordered]
 * [--no-resume] [--store DIR] [--queue URL]`: one call per input line, one
 * JSON result per line on stdout (engine/batch/batch.ts has the rules; with
 * a queue, engine/farm/submit.ts: the calls run on a farm's workers).
 * Ctrl-C stops cleanly: no new call starts, running ones are cancelled and
 * their results written; a second signal exits at once.
 */
import { createReadStream, promises as fsp } from 'node:fs';
import { type BatchResult, batchFailed } from '../engine/batch/batch.js';
import type { OversizeLine } from '../engine/batch/items.js';
import { lines } from '../engine/batch/lines.js';
import { Engine } from '../engine/engine.js';
import { QUEUE_ENV } from '../engine/farm/queue-url.js';
import { outputBytes } from '../engine/farm/worker.js';
import { MAX_CONCURRENCY } from '../engine/pool/pool.js';
import { BadArgumentsError, NotFoundError } from '../engine/protocol/errors.js';
import { signalExitCode } from '../engine/signals.js';
import {
  type CliContext,
  type Command,
  EXIT_FAILURE,
  EXIT_OK,
  HELP_OPTION,
  parseCommandLine,
  parseCount,
  RUN_CONFIG_OPTIONS,
  STORE_OPTION,
  writeOut,
} from './common.js';
import { applyConfig, loadRunConfig } from './config.js';
import { ProgressBar, type ProgressCounts } from './progress.js';

const STOPPING: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

const USAGE = `Usage: sluice batch <FILE | -> [--concurrency N] [--session ID] [--ordered]
                    [--no-resume] [--store DIR] [--config FILE] [--plugin PATH]...
                    [--mcp NAME=COMMAND]... [--sandbox MODE] [--network MODE]
       sluice batch <FILE | -> --queue URL --session ID [--ordered] [--no-resume]

Runs one tool call per line of FILE (- reads stdin), each a JSON object
{ "id": ID, "tool": NAME, "args": {...}, "session": ID }, and writes one JSON
result per line to stdout: { "id", "index", "result" } with the call's
terminal result, or { "id", "index", "error" } for a line that is not a call
(bad JSON, missing id, duplicate id, unknown tool). "index" is the line's
number minus one; blank lines are skipped.

  FILE              JSON lines; an id is [A-Za-z0-9][A-Za-z0-9._:-]{0,127} or an integer
  --concurrency N   calls running at once, at most 1024 (default: the engine's concurrency)
  --session ID      record calls in session ID (a line's own "session" wins); with a
                    session, ids that already have a recorded outcome (not cancelled)
                    are skipped and their recorded results written with "resumed": true
  --ordered         results in input order (default: completion order); at most
                    4 x N results wait for an earlier one
  --no-resume       run every line, even ids already completed in the session
  --store DIR       the store (default: $SLUICE_STORE, else ./.sluice)
  --config FILE     JSON: { "mcpServers": {...}, "plugins": [PATH] } (as sluice run)
  --plugin PATH     register a plugin tool module (repeatable)
  --mcp NAME=COMMAND [ARGS]
                    start an MCP server over stdio; its tools are NAME.<tool> (repeatable)
  --sandbox MODE    run tools' processes under bubblewrap: workspace-write (the working
                    directory and the config's writable paths writable), read-only, or off
                    (default: the config's sandbox, else off; docs/security.md)
  --network MODE    off (a loopback of its own; the default in a sandbox) or on
  --queue URL       run the calls on a farm's workers (sluice worker; docs/farm.md) through the
                    queue nats://host:port/NAME (default: $${QUEUE_ENV}); needs --session, the
                    batch's id on the queue; a result has "farm" (status, the output's
                    artifact:// URI, worker, attempts) instead of "result"; resuming returns
                    the results already recorded on the queue; Ctrl-C withdraws the batch
                    (running calls cancelled on their workers, the rest recorded cancelled).
                    Concurrency, tools and sandbox are the workers'

On a terminal, stderr shows done/total, rate, ETA, failures and bytes captured.
Exit status: 0 every call succeeded, 1 a call failed or a line was not a call,
2 bad usage, 130 stopped by Ctrl-C (143 SIGTERM, 129 SIGHUP) after writing the
results of the calls it cancelled; a second signal exits at once.
`;

const OPTIONS = {
  concurrency: { type: 'string' },
  session: { type: 'string', complete: 'session' },
  ordered: { type: 'boolean' },
  'no-resume': { type: 'boolean' },
  queue: { type: 'string' },
  ...RUN_CONFIG_OPTIONS,
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

/** Counts the lines of `path` that are not blank, streaming (for the progress total). */
async function countLines(path: string): Promise<number> {
  let n = 0;
  for await (const line of lines(createReadStream(path))) if (typeof line !== 'string' || line.trim() !== '') n++;
  return n;
}

/** The `batch` command. */
export const command: Command = {
  summary: 'run one tool call per JSON line; one JSON result per line (resumable with --session)',
  usage: USAGE,
  options: OPTIONS,
  positionals: [{ name: '<FILE | ->', complete: 'file' }],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'batch');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length !== 1) {
      throw new BadArgumentsError(
        `sluice batch takes exactly one input file (- for stdin), got ${positionals.length} (see sluice batch --help)`,
      );
    }
    const file = positionals[0] as string;
    const concurrency = parseCount('concurrency', values.concurrency);
    if (concurrency === 0) throw new BadArgumentsError('--concurrency must be at least 1, got "0"');
    // More than an engine runs at once would only queue: refused rather than quietly run narrower.
    if (concurrency !== undefined && concurrency > MAX_CONCURRENCY) {
      throw new BadArgumentsError(`--concurrency must be at most ${MAX_CONCURRENCY}, got "${concurrency}"`);
    }
    if (file !== '-') {
      const st = await fsp.stat(file).catch(() => undefined);
      if (!st) throw new NotFoundError(`no such batch file: ${file}`, { path: file });
      if (st.isDirectory()) throw new BadArgumentsError(`${file} is a directory, not a file of JSON lines`);
    }
    const queue = values.queue ?? ctx.env[QUEUE_ENV];
    if (queue) checkFarmFlags(values);
    const stderr = ctx.stderr as NodeJS.WriteStream;
    // A regular file is counted first for the progress total; a pipe or FIFO is read once only.
    const countable = file !== '-' && (await fsp.stat(file)).isFile();
    const total = stderr.isTTY === true && countable ? await countLines(file) : undefined;
    const batchOptions = {
      ...(values.session !== undefined ? { session: values.session } : {}),
      ordered: values.ordered === true,
      resume: values['no-resume'] !== true,
    };
    if (queue) {
      const { runFarmBatch } = await import('../engine/farm/submit.js');
      return withStop((signal) =>
        writeResults(ctx, file, total, (input) => runFarmBatch(input, { ...batchOptions, queue, signal })),
      );
    }
    const extra = await loadRunConfig(values, process.cwd());
    const engine = await Engine.open({
      ...extra.engine,
      ...(values.store ? { store: values.store } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
    });
    try {
      await applyConfig(engine, extra);
      return await withStop((signal) =>
        writeResults(ctx, file, total, (input) =>
          engine.batch(input, {
            ...batchOptions,
            ...(concurrency !== undefined ? { concurrency } : {}),
            signal,
          }),
        ),
      );
    } finally {
      await engine.close();
    }
  },
};

/** The options that belong to a worker, refused with --queue rather than silently ignored. */
const WORKER_FLAGS = ['concurrency', 'config', 'plugin', 'mcp', 'sandbox', 'network', 'store'] as const;

function checkFarmFlags(values: Partial<Record<(typeof WORKER_FLAGS)[number], unknown>> & { session?: string }): void {
  for (const flag of WORKER_FLAGS) {
    if (values[flag] !== undefined) {
      throw new BadArgumentsError(`--${flag} is a worker's setting: a batch with --queue runs on the workers' engines`);
    }
  }
  if (values.session === undefined) {
    throw new BadArgumentsError(
      "a batch with --queue needs --session ID: the batch's id on the queue and its resume point",
    );
  }
}

/**
 * Runs `fn` with a signal the first SIGINT, SIGTERM or SIGHUP aborts (a
 * second exits at once) and returns its exit status, or the signal's.
 */
async function withStop(fn: (signal: AbortSignal) => Promise<number>): Promise<number> {
  const stop = new AbortController();
  let first: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    // The process 'exit' hook kills the calls' process groups.
    if (first) process.exit(signalExitCode(first));
    first = sig;
    stop.abort();
  };
  for (const s of STOPPING) process.on(s, onSignal);
  try {
    const code = await fn(stop.signal);
    return first ? signalExitCode(first) : code;
  } finally {
    for (const s of STOPPING) process.off(s, onSignal);
  }
}

/** Reads `file`'s lines into `run` and writes its results, one JSON line each, with the progress line on a terminal. */
async function writeResults(
  ctx: CliContext,
  file: string,
  total: number | undefined,
  run: (input: AsyncIterable<string | OversizeLine>) => AsyncIterable<BatchResult>,
): Promise<number> {
  const stderr = ctx.stderr as NodeJS.WriteStream;
  const counts: ProgressCounts = { done: 0, total, failed: 0, bytes: 0 };
  const bar = stderr.isTTY === true ? new ProgressBar(stderr) : undefined;
  const input = file === '-' ? process.stdin : createReadStream(file);
  let failed = false;
  bar?.update(counts, true);
  try {
    for await (const r of run(lines(input))) {
      // Writing waits for stdout: a slow reader slows the batch instead of filling memory.
      await writeOut(ctx.stdout, `${JSON.stringify(r)}\n`);
      counts.done++;
      if (batchFailed(r)) {
        counts.failed++;
        failed = true;
      }
      counts.bytes += r.farm ? (r.farm.bytes ?? 0) : outputBytes(r.result?.output);
      bar?.update(counts);
    }
  } finally {
    input.destroy();
  }
  bar?.finish(counts);
  return failed ? EXIT_FAILURE : EXIT_OK;
}
