/**
 * `sluice run <tool> --args '<json>' [--session ID] [--json] [--store DIR]`:
 * runs one call on the embedded store. On a terminal, stderr shows a live
 * status area (live-view.ts: spinner, elapsed time, bytes and lines per
 * stream, the last complete display lines) that the final display replaces
 * at the end; stdout gets the
 * model view (or, with --json, the terminal result), so piping it gives only
 * what a model would see. Ctrl-C, SIGTERM and SIGHUP cancel the call cleanly
 * (its cancelled result recorded, its processes killed) and exit 130, 143 or
 * 129 as the signal would have; a second signal exits at once.
 */
import { Engine } from '../engine/engine.js';
import { sanitizeForTerminal } from '../engine/presentation/sanitize.js';
import { BadArgumentsError, type ErrorCode } from '../engine/protocol/errors.js';
import { PREVIEW_MODES, type PreviewMode } from '../engine/protocol/streams.js';
import { signalExitCode } from '../engine/signals.js';
import {
  type Command,
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  forTerminal,
  HELP_OPTION,
  LIMIT_OPTIONS,
  parseCommandLine,
  RUN_CONFIG_OPTIONS,
  STORE_OPTION,
  writeOut,
} from './common.js';
import { applyConfig, loadRunConfig } from './config.js';
import { LiveView } from './live-view.js';

/** Exit code of a cancelled call (128 + SIGINT, as shells report it). */
export const EXIT_CANCELLED = 130;

/** The signals that cancel the call; each exits with 128 + its number, as the default action would. */
const CANCELLING: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

const USAGE = `Usage: sluice run <tool> [--args JSON] [--session ID] [--json] [--store DIR]
                  [--preview head|head+tail] [--config FILE] [--plugin PATH]... [--mcp NAME=COMMAND]... [--sandbox MODE] [--network MODE]
                  [--max-lines N] [--max-bytes N] [--concurrency N]

Runs one tool call and prints its model view: bounded previews of its output
with read hints (artifact://...) for the rest.

  <tool>          a registered tool: bash, read, or one from --config, --plugin or --mcp
  --args JSON     the tool's arguments as a JSON object (default {})
  --session ID    record the call in session ID (see sluice replay)
  --json          print the terminal result as JSON instead of the model view
  --store DIR     the store (default: $SLUICE_STORE, else ./.sluice)
  --preview MODE  how truncated streams are shown: head (their first lines) or head+tail
                  (first and last lines; the hint reads the middle). Default: the tool's
                  own choice (bash: head+tail), else toolOutput.preview, else head
  --config FILE   JSON: { "mcpServers": { NAME: { "command", "args", "env", "cwd" } }, "plugins": [PATH],
                  "toolOutput": { "maxLines", "maxBytes", "preview", "tailShare", "maxModelBytes" },
                  "concurrency" } (the flags below override it)
  --plugin PATH   register a plugin tool module (repeatable)
  --mcp NAME=COMMAND [ARGS]
                  start an MCP server over stdio; its tools are NAME.<tool> (repeatable)
  --sandbox MODE  run tools' processes under bubblewrap: workspace-write (the working
                  directory and the config's writable paths writable), read-only, or off
                  (default: the config's sandbox, else off; docs/security.md)
  --network MODE  off (a loopback of its own; the default in a sandbox) or on
  --max-lines N   lines of each stream's preview in the model view (default 2000)
  --max-bytes N   UTF-8 bytes of each stream's preview (default 51200)
  --concurrency N calls running at once, at most 1024 (default max(16, 2 x cores))

Exit status: 0 success, 1 the tool failed, 2 bad usage or arguments, 130 cancelled
(Ctrl-C), 143 or 129 cancelled by SIGTERM or SIGHUP. A second signal exits at once.
When stderr is a terminal, a status area there shows the call while it runs (elapsed
time, bytes and lines per stream, the last complete lines of its display) and is
replaced by the final display at the end; otherwise nothing is drawn.
`;

const OPTIONS = {
  args: { type: 'string' },
  session: { type: 'string', complete: 'session' },
  json: { type: 'boolean' },
  preview: { type: 'string', complete: ['head', 'head+tail'] },
  ...RUN_CONFIG_OPTIONS,
  ...LIMIT_OPTIONS,
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

/** Result error codes that mean the request itself was wrong. */
const USAGE_RESULT_CODES: ReadonlySet<ErrorCode> = new Set(['EBADARGS', 'EBADURI']);

function parseJsonArgs(text: string | undefined): unknown {
  if (text === undefined) return {};
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new BadArgumentsError(
      `--args is not valid JSON: ${(err as Error).message} (got ${JSON.stringify(text.slice(0, 200))})`,
    );
  }
}

function parsePreview(text: string | undefined): PreviewMode | undefined {
  if (text === undefined || PREVIEW_MODES.includes(text as PreviewMode)) return text as PreviewMode | undefined;
  throw new BadArgumentsError(`--preview must be ${PREVIEW_MODES.join(' or ')}, got ${JSON.stringify(text)}`);
}

/** The `run` command. */
export const command: Command = {
  summary: 'run one tool call and print its model view (or --json result)',
  usage: USAGE,
  options: OPTIONS,
  positionals: [{ name: '<tool>', complete: 'tool' }],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'run');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length !== 1) {
      throw new BadArgumentsError(
        `sluice run takes exactly one tool name, got ${positionals.length} (see sluice run --help)`,
      );
    }
    const tool = positionals[0] as string;
    const args = parseJsonArgs(values.args);
    const preview = parsePreview(values.preview);
    const extra = await loadRunConfig(values, process.cwd());
    const engine = await Engine.open({ ...extra.engine, ...(values.store ? { store: values.store } : {}) });
    const stderr = ctx.stderr as NodeJS.WriteStream;
    const live = stderr.isTTY === true;
    let first: NodeJS.Signals | undefined;
    let handle: ReturnType<Engine['call']> | undefined;
    const onSignal = (sig: NodeJS.Signals) => {
      // The process 'exit' hook kills the call's process groups.
      if (first) process.exit(signalExitCode(first));
      first = sig;
      handle?.cancel(sig === 'SIGINT' ? 'interrupted (Ctrl-C)' : `sluice run received ${sig}`);
    };
    for (const s of CANCELLING) process.on(s, onSignal);
    try {
      await applyConfig(engine, extra);
      handle = engine.call(tool, args, {
        ...(values.session ? { session: values.session } : {}),
        ...(preview ? { preview } : {}),
      });
      // A signal that came while the engine opened cancels the call as soon as it exists.
      if (first) handle.cancel(`sluice run received ${first}`);
      const events = live ? handle.events() : undefined;
      const view = live ? new LiveView(stderr, tool) : undefined;
      view?.start();
      const pump = (async () => {
        if (!events || !view) return;
        for await (const ev of events) {
          if (ev.type === 'display') view.display(ev.text);
          else if (ev.type === 'progress') view.progress(ev.streams);
        }
      })();
      let result: Awaited<typeof handle.result>;
      try {
        result = await handle.result;
        await pump;
      } catch (err) {
        view?.stop();
        throw err;
      }
      // The final display replaces the live area (it is not appended after it).
      view?.finish(sanitizeForTerminal(result.display));
      await writeOut(
        ctx.stdout,
        values.json
          ? `${JSON.stringify(result)}\n`
          : forTerminal(ctx.stdout, result.model.endsWith('\n') ? result.model : `${result.model}\n`),
      );
      if (result.status === 'success') return EXIT_OK;
      if (result.status === 'cancelled') return first ? signalExitCode(first) : EXIT_CANCELLED;
      if (!values.json && result.error) {
        ctx.stderr.write(`${result.error.code}: ${sanitizeForTerminal(result.error.message)}\n`);
      }
      return result.error && USAGE_RESULT_CODES.has(result.error.code) ? EXIT_USAGE : EXIT_FAILURE;
    } finally {
      for (const s of CANCELLING) process.off(s, onSignal);
      await engine.close();
    }
  },
};
