#!/usr/bin/env node
/**
 * The `sluice` command line. Each subcommand lives in its own module and is
 * loaded only when invoked, so `sluice verify` never pays for the engine.
 * To add one: write engine/cli/<name>.ts exporting `command: Command`
 * (see common.ts) and add a line to {@link COMMANDS}.
 */
import { readFileSync } from 'node:fs';
import { BadArgumentsError } from '../protocol/errors.js';
import { type CliContext, type Command, EXIT_OK, EXIT_USAGE, reportError } from './common.js';

/** A row of the command table: the help line, and how to load the command. */
interface CommandEntry {
  summary: string;
  load: () => Promise<{ command: Command }>;
}

/** Every subcommand, in help order. */
const COMMANDS: Record<string, CommandEntry> = {
  run: {
    summary: 'run one tool call and print its model view (or --json result)',
    load: () => import('./run.js'),
  },
  batch: {
    summary: 'run one tool call per JSON line; one JSON result per line (resumable with --session)',
    load: () => import('./batch.js'),
  },
  read: {
    summary: 'print one page of an artifact (artifact://<digest>[/<stream>]), file or directory',
    load: () => import('./read.js'),
  },
  grep: {
    summary: 'search a stored artifact like grep -n (zero-based line numbers)',
    load: () => import('./grep.js'),
  },
  verify: {
    summary: 'check every blob against its digest; list corrupt and missing blobs',
    load: () => import('./verify.js'),
  },
  replay: {
    summary: 'rebuild the calls of a session from its event log (final display or model view)',
    load: () => import('./replay.js'),
  },
  gc: {
    summary: 'collect unreferenced blobs older than the grace period; reclaim files of dead processes',
    load: () => import('./gc.js'),
  },
  serve: {
    summary: 'serve the HTTP API (calls, live events over SSE, reads, sessions) until SIGINT/SIGTERM/SIGHUP',
    load: () => import('./serve.js'),
  },
};

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return String(pkg.version ?? 'unknown');
  } catch {
    return 'unknown';
  }
}

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  const rows = Object.entries(COMMANDS).map(([name, e]) => `  ${name.padEnd(width)}  ${e.summary}`);
  return [
    'Usage: sluice <command> [options]',
    '',
    'Commands:',
    ...rows,
    '',
    'Every command takes --help. The store is --store DIR, else $SLUICE_STORE, else ./.sluice.',
    '',
  ].join('\n');
}

/** Runs `sluice` with `argv` (the arguments after the program name); resolves to the exit code. */
export async function main(argv: readonly string[], ctx: CliContext): Promise<number> {
  const [name, ...rest] = argv;
  try {
    if (name === undefined) {
      ctx.stderr.write(usage());
      return EXIT_USAGE;
    }
    if (name === '--help' || name === '-h' || name === 'help') {
      ctx.stdout.write(usage());
      return EXIT_OK;
    }
    if (name === '--version' || name === '-v') {
      ctx.stdout.write(`${version()}\n`);
      return EXIT_OK;
    }
    const entry = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (!entry) {
      throw new BadArgumentsError(
        `unknown command ${JSON.stringify(name)}; commands: ${Object.keys(COMMANDS).join(', ')} (see sluice --help)`,
      );
    }
    const { command } = await entry.load();
    return await command.run(rest, ctx);
  } catch (err) {
    return reportError(err, ctx);
  }
}

const ctx: CliContext = { stdout: process.stdout, stderr: process.stderr, env: process.env };
// A reader that closes the pipe early (`sluice read ... | head`) is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? EXIT_OK);
  throw err;
});
// exitCode rather than exit(): pending stdout is flushed before the process ends.
process.exitCode = await main(process.argv.slice(2), ctx);
