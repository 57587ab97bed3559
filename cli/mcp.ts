/**
 * `sluice mcp [--session NAME] [--store DIR] [--config FILE] [--plugin PATH]... [--mcp NAME=COMMAND]...`:
 * an MCP server over stdio (docs/mcp.md) on an engine built exactly as
 * `sluice run` builds its own (loadRunConfig, Engine.open, applyConfig), so
 * every engine option a config or flag gives applies here too. Its tools are
 * the engine's: the built-ins, plugins and the tools of the configured MCP
 * servers, which makes it a gateway in front of them. The connection is one
 * sluice session. It serves until the client closes stdin (exit 0) or a
 * signal stops it (SIGINT 0, SIGTERM 143, SIGHUP 129), cancelling and
 * recording whatever is still running. stdout carries only the protocol;
 * diagnostics go to stderr.
 */
import { Engine } from '../engine/engine.js';
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { OPTIONAL_DEPENDENCIES, requireOptional } from '../engine/protocol/optional-dependencies.js';
import { assertSessionId } from '../engine/sessions/session-id.js';
import { connectionSessionId } from '../server/mcp-names.js';
import {
  type Command,
  EXIT_OK,
  HELP_OPTION,
  LIMIT_OPTIONS,
  parseCommandLine,
  RUN_CONFIG_OPTIONS,
  STORE_OPTION,
  stoppedBy,
  stopSignals,
  writeOut,
} from './common.js';
import { applyConfig, loadRunConfig } from './config.js';

const USAGE = `Usage: sluice mcp [--session NAME] [--store DIR] [--config FILE] [--plugin PATH]...
                  [--mcp NAME=COMMAND]... [--sandbox MODE] [--network MODE]
                  [--max-lines N] [--max-bytes N] [--concurrency N]

Serves MCP over stdio (see docs/mcp.md): the tools bash, read, grep, every
plugin and the tools of every configured MCP server (NAME.<tool>: sluice is
then a gateway in front of them). Each result is the model view (bounded
previews with read(...) hints that the read tool follows) plus structured
content (status, manifest and stream refs); artifact:// URIs are resources.
Add it to a host with: claude mcp add sluice -- npx sluice mcp

  --session NAME  the session every call is recorded in (default: a new one per
                  connection, mcp-<time>-<random>; see sluice replay)
  --store DIR     the store (default: $SLUICE_STORE, else ./.sluice)
  --config FILE   JSON: { "mcpServers": { NAME: { "command", "args", "env", "cwd" } }, "plugins": [PATH],
                  "toolOutput": { "maxLines", "maxBytes" }, "concurrency" } (the flags below override it)
  --plugin PATH   register a plugin tool module (repeatable)
  --mcp NAME=COMMAND [ARGS]
                  start an MCP server over stdio; its tools are NAME.<tool> (repeatable)
  --sandbox MODE  run tools' processes under bubblewrap: workspace-write, read-only or off
                  (default: the config's sandbox, else off; docs/security.md)
  --network MODE  off (the default in a sandbox) or on
  --max-lines N   lines of each stream's preview in the model view (default 2000)
  --max-bytes N   UTF-8 bytes of each stream's preview (default 51200)
  --concurrency N calls running at once, at most 1024 (default max(16, 2 x cores))

Serves until the client closes stdin (exit 0) or SIGINT (0), SIGTERM (143) or
SIGHUP (129); running calls are then cancelled and recorded. stdout carries
only MCP messages; diagnostics go to stderr.
`;

const OPTIONS = {
  session: { type: 'string', complete: 'session' },
  ...RUN_CONFIG_OPTIONS,
  ...LIMIT_OPTIONS,
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

/** The `mcp` command. */
export const command: Command = {
  summary: 'serve MCP over stdio: bash, read, grep, plugins and MCP servers behind bounded results',
  usage: USAGE,
  options: OPTIONS,
  positionals: [],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'mcp');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length > 0) {
      throw new BadArgumentsError(`sluice mcp takes no positional arguments, got ${JSON.stringify(positionals[0])}`);
    }
    const session = values.session ?? connectionSessionId();
    assertSessionId(session);
    requireOptional(OPTIONAL_DEPENDENCIES.mcp);
    const extra = await loadRunConfig(values, process.cwd());
    const signals = stopSignals();
    // The same engine as sluice run's: whatever engine option the config carries applies here.
    const engine = await Engine.open({ ...extra.engine, ...(values.store ? { store: values.store } : {}) });
    try {
      await applyConfig(engine, extra);
      const [{ createMcpServer }, { BoundedStdioTransport }] = await Promise.all([
        import('../server/mcp/server.js'),
        import('../server/mcp/stdio.js'),
      ]);
      const server = createMcpServer(engine, { session });
      const ended = new Promise<void>((resolve) => {
        server.onclose = resolve;
      });
      await server.connect(new BoundedStdioTransport(process.stdin, ctx.stdout as NodeJS.WriteStream));
      ctx.stderr.write(
        `sluice mcp: serving ${engine.tools().length} tools on stdio (session ${session}, store ${engine.store.root})\n`,
      );
      const sig = await Promise.race([ended.then(() => undefined), signals.first]);
      await server.close();
      return stoppedBy(sig);
    } finally {
      signals.dispose();
      await engine.close();
    }
  },
};
