#!/usr/bin/env node
/**
 * The `sluice` command line. Each subcommand lives in its own module and is
 * loaded only when invoked, so `sluice verify` never pays for the engine.
 * To add one: write cli/<name>.ts exporting `command: Command`
 * (see common.ts) and add a line to {@link COMMANDS}.
 */
import { packageVersion } from '../engine/package-root.js';
import { BadArgumentsError, BadOptionError } from '../engine/protocol/errors.js';
import { didYouMean } from '../engine/suggest.js';
import { type CliContext, type Command, EXIT_OK, EXIT_USAGE, HELP_OPTION, reportError } from './common.js';
import type { CompletionSpec } from './completion.js';

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
  worker: {
    summary: "run a farm's calls from a queue on this host's engine until SIGTERM (then drain)",
    load: () => import('./worker.js'),
  },
  mcp: {
    summary: 'serve MCP over stdio: bash, read, grep, plugins and MCP servers behind bounded results',
    load: () => import('./mcp.js'),
  },
  tools: {
    summary: 'list the tools a call can name, with descriptions and arguments (--json: their schemas)',
    load: () => import('./tools.js'),
  },
  sessions: {
    summary: 'list the sessions: calls, last activity, bytes referenced',
    load: () => import('./sessions.js'),
  },
  revert: {
    summary: 'revert a session to before one of its calls (hidden from replay, no longer GC roots)',
    load: () => import('./revert.js'),
  },
  sandbox: {
    summary: 'check what this machine supports of the tool sandbox (bwrap, cgroups, limits)',
    load: () => import('./sandbox.js'),
  },
  completion: {
    summary: 'print the bash or zsh completion script',
    load: async () => ({ command: (await import('./completion-command.js')).completionCommand(completionSpecs) }),
  },
};

/** Every command's declarations, for the completion scripts (loads every command module). */
export async function completionSpecs(): Promise<CompletionSpec[]> {
  const specs: CompletionSpec[] = [];
  for (const [name, entry] of Object.entries(COMMANDS)) {
    const { command } = await entry.load();
    specs.push({
      name,
      summary: entry.summary,
      options: command.options ?? HELP_OPTION,
      positionals: command.positionals ?? [],
    });
  }
  return specs;
}

/** The entry of command `name`, or EBADARGS naming the closest command. */
function commandEntry(name: string): CommandEntry {
  const entry = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (entry) return entry;
  throw new BadArgumentsError(
    `unknown command ${JSON.stringify(name)}${didYouMean(name, Object.keys(COMMANDS), true)} (commands: ${Object.keys(COMMANDS).join(', ')}; see sluice --help)`,
    { command: name },
  );
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
    'Every command takes --help (or: sluice help <command>). The store is --store DIR, else $SLUICE_STORE, else ./.sluice.',
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
    if (name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
      ctx.stdout.write(usage());
      return EXIT_OK;
    }
    if (name === 'help') {
      if (rest.length > 1) throw new BadArgumentsError('sluice help takes at most one command');
      const { command } = await commandEntry(rest[0] as string).load();
      ctx.stdout.write(command.usage);
      return EXIT_OK;
    }
    if (name === '--version' || name === '-v') {
      ctx.stdout.write(`${packageVersion()}\n`);
      return EXIT_OK;
    }
    if (name.startsWith('-')) {
      throw new BadOptionError(
        `unknown option ${name}${didYouMean(name, ['--help', '--version'])} before the command (see sluice --help)`,
        { option: name },
      );
    }
    const { command } = await commandEntry(name).load();
    return await command.run(rest, ctx);
  } catch (err) {
    return reportError(err, ctx);
  }
}

const ctx: CliContext = { stdout: process.stdout, stderr: process.stderr, env: process.env };
// The AWS SDK (an S3 store) warns on stderr, once per process, that its releases from 2027 want
// Node.js 22: nothing about this command, and stderr is where its errors go. The CLI owns its
// process environment; library users decide for themselves.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
// A reader that closes the pipe early (`sluice read ... | head`) is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? EXIT_OK);
  throw err;
});
// exitCode rather than exit(): pending stdout is flushed before the process ends.
process.exitCode = await main(process.argv.slice(2), ctx);
