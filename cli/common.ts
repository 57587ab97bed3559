/**
 * What every `sluice` command shares: the command shape, argument parsing
 * that turns usage mistakes into coded errors, store resolution, and the one
 * mapping from errors to `CODE: message` lines and exit codes.
 */
import { promises as fsp } from 'node:fs';
import type { parseArgs } from 'node:util';
import { sanitizeForTerminal } from '../engine/presentation/sanitize.js';
import {
  BadArgumentsError,
  BadOptionError,
  type ErrorCode,
  NotFoundError,
  type SluiceError,
  toSluiceError,
} from '../engine/protocol/errors.js';
import { signalExitCode } from '../engine/signals.js';
import { describeLocation, resolveStoreLocation } from '../store/location.js';
import { Store } from '../store/store.js';
import { type CommandOptions, type Completion, parseOptions } from './parse.js';

/** Where a command writes and what environment it sees; tests and embedders can substitute them. */
export interface CliContext {
  /** Standard output: the command's result. */
  stdout: NodeJS.WritableStream;
  /** Standard error: diagnostics and `CODE: message` lines. */
  stderr: NodeJS.WritableStream;
  /** Environment variables (`SLUICE_STORE`, ...). */
  env: NodeJS.ProcessEnv;
}

/** A positional argument of a command, for shell completion. */
export interface CommandPositional {
  /** Its name in the usage text (`<tool>`). */
  name: string;
  /** What completion offers for it. */
  complete: Completion;
}

/**
 * One `sluice` subcommand. Each lives in its own module under cli/ and exports `command`.
 * A command that declares `options` (the object it parses with
 * {@link parseCommandLine}) and `positionals` gets shell completion, and
 * test/cli/conventions.test.ts checks that its usage text names every option.
 */
export interface Command {
  /** One line for `sluice --help`. */
  summary: string;
  /** The full usage text, printed by `sluice <command> --help`. */
  usage: string;
  /** The options it parses (for completion and the usage check). */
  options?: CommandOptions;
  /** Its positional arguments, in order (for completion). */
  positionals?: readonly CommandPositional[];
  /** Runs the command on the arguments after its name; resolves to the process exit code. */
  run(argv: readonly string[], ctx: CliContext): Promise<number>;
}

/** Option declarations and what completes them (parse.ts). */
export type { CommandOptions, Completion } from './parse.js';

/** What {@link parseCommandLine} returns for options `O`: typed `values` and the `positionals`. */
export type ParsedCommandLine<O extends CommandOptions> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; allowPositionals: true; strict: true }>
>;

/** Exit code of a successful command. */
export const EXIT_OK = 0;
/** Exit code of a command that failed (not found, corrupt, disk, ...). */
export const EXIT_FAILURE = 1;
/** Exit code of a usage mistake or bad argument. */
export const EXIT_USAGE = 2;

/** Codes that mean the command line itself was wrong, so exit {@link EXIT_USAGE}. */
const USAGE_CODES: ReadonlySet<ErrorCode> = new Set(['EBADARGS', 'EBADOPTION', 'EBADURI', 'EUNKNOWNTOOL']);

/** The `--store DIR` option every store command accepts. */
export const STORE_OPTION = { store: { type: 'string', complete: 'directory' } } as const satisfies CommandOptions;

/** The `--help` option every command accepts. */
export const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const satisfies CommandOptions;

/** `--config`, `--plugin` and `--mcp`: the tools beyond the built-ins (config.ts). */
export const RUN_CONFIG_OPTIONS = {
  config: { type: 'string', complete: 'file' },
  plugin: { type: 'string', multiple: true, complete: 'file' },
  mcp: { type: 'string', multiple: true },
  sandbox: { type: 'string', complete: ['off', 'workspace-write', 'read-only'] },
  network: { type: 'string', complete: ['off', 'on'] },
} as const satisfies CommandOptions;

/** `--max-lines`, `--max-bytes` and `--concurrency`: the engine's limits (config.ts, {@link limitFlags}). */
export const LIMIT_OPTIONS = {
  'max-lines': { type: 'string' },
  'max-bytes': { type: 'string' },
  concurrency: { type: 'string' },
} as const satisfies CommandOptions;

/** The engine settings {@link LIMIT_OPTIONS} give, validated as counts (the engine checks their ranges). */
export function limitFlags(values: {
  'max-lines'?: string | undefined;
  'max-bytes'?: string | undefined;
  concurrency?: string | undefined;
}): { toolOutput: { maxLines?: number; maxBytes?: number }; concurrency?: number } {
  const maxLines = parseCount('max-lines', values['max-lines']);
  const maxBytes = parseCount('max-bytes', values['max-bytes']);
  const concurrency = parseCount('concurrency', values.concurrency);
  return {
    toolOutput: {
      ...(maxLines === undefined ? {} : { maxLines }),
      ...(maxBytes === undefined ? {} : { maxBytes }),
    },
    ...(concurrency === undefined ? {} : { concurrency }),
  };
}

/** The exit code for `err`: {@link EXIT_USAGE} for usage mistakes, else {@link EXIT_FAILURE}. */
export function exitCodeFor(err: SluiceError): number {
  return USAGE_CODES.has(err.code) ? EXIT_USAGE : EXIT_FAILURE;
}

/**
 * Prints `err` as `CODE: message` on stderr and returns its exit code.
 * Anything that is not a sluice error is reported under `fallback`; set
 * `SLUICE_DEBUG=1` to see its stack as well.
 */
export function reportError(err: unknown, ctx: CliContext, fallback: ErrorCode = 'EPROTOCOL'): number {
  const e = toSluiceError(err, fallback);
  // Messages quote what they reject (a tool's error, a URI, a path): never let that text drive the terminal.
  ctx.stderr.write(`${e.code}: ${sanitizeForTerminal(e.message)}\n`);
  if (ctx.env.SLUICE_DEBUG && err instanceof Error && err.stack) ctx.stderr.write(`${err.stack}\n`);
  return exitCodeFor(e);
}

/**
 * Parses a command line by the shared conventions of parse.ts (did-you-mean
 * for unknown options, values that start with `-`, repeated single-value
 * options refused), typed as `node:util` parseArgs would type `options`.
 * Errors are {@link BadOptionError} pointing at `sluice <name> --help`.
 */
export function parseCommandLine<O extends CommandOptions>(
  argv: readonly string[],
  options: O,
  name: string,
): ParsedCommandLine<O> {
  return parseOptions(argv, options, name) as unknown as ParsedCommandLine<O>;
}

/** Parses a non-negative decimal integer option, or throws {@link BadArgumentsError} quoting the value. */
export function parseCount(option: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]+$/.test(value)) {
    throw new BadArgumentsError(`--${option} must be a non-negative integer, got ${JSON.stringify(value)}`, {
      [option]: value,
    });
  }
  return Number(value);
}

/**
 * Opens the store chosen by `--store`, else `$SLUICE_STORE`, else `./.sluice`.
 * Commands that only read must not conjure an empty store into existence, so a
 * directory that does not exist is {@link NotFoundError}.
 */
export async function openExistingStore(explicit: string | undefined, env: NodeJS.ProcessEnv): Promise<Store> {
  return Store.open(await existingStore(explicit, env));
}

/**
 * The store chosen by `--store`, else `$SLUICE_STORE`, else `./.sluice`, as
 * Store.open takes it, when it exists: an `s3://` location (malformed:
 * EBADOPTION) always does here, its bucket is checked when it opens; a
 * directory that does not exist is {@link NotFoundError}.
 */
export async function existingStore(explicit: string | undefined, env: NodeJS.ProcessEnv): Promise<string> {
  const found = await chosenStore(explicit, env);
  if (found.exists) return found.locator;
  const dir = found.locator;
  throw new NotFoundError(`no sluice store at ${dir} (choose one with --store DIR or $SLUICE_STORE)`, { dir });
}

/** The chosen store's locator (a directory or an `s3://` URL) and whether it exists (an S3 one counts as existing). */
export async function chosenStore(
  explicit: string | undefined,
  env: NodeJS.ProcessEnv,
): Promise<{ locator: string; exists: boolean }> {
  const location = resolveStoreLocation(explicit, env);
  const locator = describeLocation(location);
  if (location.kind === 's3') return { locator, exists: true };
  const st = await fsp.stat(location.dir).catch(() => undefined);
  return { locator, exists: st?.isDirectory() === true };
}

/**
 * `text` as it may be written to `stream`: unchanged for a pipe or file (the
 * exact bytes are the contract there), made inert by
 * {@link sanitizeForTerminal} when the stream is a terminal, since stored
 * output and model views carry whatever bytes a tool produced.
 */
export function forTerminal(stream: NodeJS.WritableStream, text: string): string {
  return (stream as NodeJS.WriteStream).isTTY === true ? sanitizeForTerminal(text) : text;
}

/** Writes `text` (or bytes) and resolves once the stream has accepted it (so large output is not cut off at exit). */
export function writeOut(stream: NodeJS.WritableStream, text: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.write(text, (err) => (err ? reject(err) : resolve()));
  });
}

/** The signals that stop a serving command (`sluice serve`, `sluice mcp`) cleanly. */
export const STOPPING_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** The first stopping signal of a serving command, and the removal of its listeners. */
export interface StopSignals {
  /** Resolves with the first of {@link STOPPING_SIGNALS}. */
  readonly first: Promise<NodeJS.Signals>;
  /** Removes the listeners (a signal after this has its default action). */
  dispose(): void;
}

/**
 * Listens for {@link STOPPING_SIGNALS}: the first resolves `first`, so the
 * command can cancel, record and close; a second exits at once with
 * 128 + its number (the process 'exit' hooks kill the calls' process groups).
 */
export function stopSignals(): StopSignals {
  let seen: NodeJS.Signals | undefined;
  let on!: (sig: NodeJS.Signals) => void;
  const first = new Promise<NodeJS.Signals>((resolve) => {
    on = (sig) => {
      if (seen) process.exit(signalExitCode(seen));
      seen = sig;
      resolve(sig);
    };
  });
  for (const s of STOPPING_SIGNALS) process.on(s, on);
  return {
    first,
    dispose: () => {
      for (const s of STOPPING_SIGNALS) process.off(s, on);
    },
  };
}

/** Exit status after a clean stop: Ctrl-C is the ordinary stop (0); otherwise what the signal's default action reports. */
export function stoppedBy(sig: NodeJS.Signals | undefined): number {
  return sig === undefined || sig === 'SIGINT' ? EXIT_OK : signalExitCode(sig);
}
