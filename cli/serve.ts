/**
 * `sluice serve [--port N] [--host ADDR] [--store DIR] ...`: the HTTP API
 * (docs/http.md) on an engine over the store, until SIGINT, SIGTERM or
 * SIGHUP, then a clean shutdown: running calls are cancelled, finalised and
 * recorded, their processes killed, event streams get their terminal events,
 * the engine closes; exit 0 after SIGINT, 143 after SIGTERM, 129 after
 * SIGHUP (128 + the signal, as its default action would report).
 *
 * The bearer token is created on first start in `<store>/server.token`
 * (mode 0600) and printed that once; later starts reuse it silently.
 */
import { promises as fsp } from 'node:fs';
import { Engine } from '../engine/engine.js';
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { PROTOCOL_VERSION } from '../engine/protocol/messages.js';
import { loadOrCreateToken } from '../server/auth.js';
import { DEFAULT_HOST, DEFAULT_PORT, startServer } from '../server/server.js';
import {
  type Command,
  EXIT_OK,
  HELP_OPTION,
  LIMIT_OPTIONS,
  parseCommandLine,
  parseCount,
  RUN_CONFIG_OPTIONS,
  STORE_OPTION,
  stoppedBy,
  stopSignals,
  writeOut,
} from './common.js';
import { applyConfig, loadRunConfig } from './config.js';

const USAGE = `Usage: sluice serve [--port N] [--host ADDR] [--store DIR] [--config FILE]
                    [--plugin PATH]... [--mcp NAME=COMMAND]... [--sandbox MODE] [--network MODE] [--subscriber-queue N]
                    [--max-lines N] [--max-bytes N] [--concurrency N]

Serves the HTTP API (see docs/http.md) and the web view at / (docs/web.md):
start calls, follow their live events as server-sent events, fetch results,
cancel, read artifacts, list and replay sessions; MCP clients connect to
/mcp (Streamable HTTP, see docs/mcp.md). Every request needs the
bearer token, created on first start in <store>/server.token (mode 0600) and
printed only then, with the web view's address carrying it (#token=...).

  --port N        port to listen on (default ${DEFAULT_PORT}; 0 picks a free one)
  --host ADDR     address to listen on (default ${DEFAULT_HOST}, loopback only)
  --store DIR     the store (default: $SLUICE_STORE, else ./.sluice)
  --config FILE   JSON: { "mcpServers": { NAME: { "command", "args", "env", "cwd" } }, "plugins": [PATH],
                  "toolOutput": { "maxLines", "maxBytes" }, "concurrency" } (the flags below override it)
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
  --subscriber-queue N
                  events queued per event-stream client before it is marked lagged (default 256)

SIGINT, SIGTERM or SIGHUP shuts down cleanly: running calls are cancelled and
recorded, event streams receive their terminal event; then exit 0 (SIGINT), 143
(SIGTERM) or 129 (SIGHUP). A second signal exits at once.
`;

const OPTIONS = {
  port: { type: 'string' },
  host: { type: 'string' },
  ...RUN_CONFIG_OPTIONS,
  ...LIMIT_OPTIONS,
  'subscriber-queue': { type: 'string' },
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/**
 * What `sluice serve` prints on stdout once it listens: the URL, protocol
 * version and store, the web view's address, and a new token the one time it
 * is created. The web view's address carries the token in its fragment
 * (`#token=…`), which a browser never sends to the server, and only when the
 * token is new (it is printed once); otherwise the page asks for it. Rendered
 * by test/cli/documented-output.test.ts for the examples of docs/http.md and
 * docs/cli.md.
 */
export function serveBanner(at: {
  url: string;
  store: string;
  token?: { path: string; token: string };
  tokenPath?: string;
}): string {
  const lines = [`sluice serve: listening on ${at.url} (protocol ${PROTOCOL_VERSION}, store ${at.store})`];
  if (at.token) {
    lines.push(`sluice serve: new API token, shown only this once (stored in ${at.token.path}, mode 0600):`);
    lines.push(at.token.token);
    lines.push(`sluice serve: web view: ${at.url}/#token=${at.token.token}`);
  } else if (at.tokenPath) {
    lines.push(`sluice serve: web view: ${at.url}/ (it asks for the token in ${at.tokenPath})`);
  }
  return `${lines.join('\n')}\n`;
}

/** The `serve` command. */
export const command: Command = {
  summary: 'serve the HTTP API (calls, live events over SSE, reads, sessions) until SIGINT/SIGTERM/SIGHUP',
  usage: USAGE,
  options: OPTIONS,
  positionals: [],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'serve');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length > 0) {
      throw new BadArgumentsError(`sluice serve takes no positional arguments, got ${JSON.stringify(positionals[0])}`);
    }
    const port = parseCount('port', values.port) ?? DEFAULT_PORT;
    if (port > 65535) throw new BadArgumentsError(`--port must be at most 65535, got ${port}`);
    const queue = parseCount('subscriber-queue', values['subscriber-queue']);
    if (queue === 0) throw new BadArgumentsError('--subscriber-queue must be at least 1');
    const host = values.host ?? DEFAULT_HOST;
    const extra = await loadRunConfig(values, process.cwd());
    const signals = stopSignals();
    let sig: NodeJS.Signals;
    // A config file's settings (toolOutput, concurrency) apply to the served engine as they do to sluice run.
    const engine = await Engine.open({ ...extra.engine, ...(values.store ? { store: values.store } : {}) });
    try {
      await applyConfig(engine, extra);
      const token = await loadOrCreateToken(engine.store.root);
      const server = await startServer(engine, {
        token: token.token,
        host,
        port,
        ...(queue !== undefined ? { subscriberQueue: queue } : {}),
      }).catch(async (err: unknown) => {
        // A token nobody was shown must not stay: the next start would reuse it without printing it.
        if (token.created) await fsp.rm(token.path, { force: true });
        throw err;
      });
      await writeOut(
        ctx.stdout,
        serveBanner({
          url: server.url,
          store: engine.store.root,
          ...(token.created ? { token } : { tokenPath: token.path }),
        }),
      );
      if (!LOOPBACK.test(host)) {
        ctx.stderr.write(
          `sluice serve: warning: listening on ${host}, not loopback: anyone who can reach it and has the token can run tools\n`,
        );
      }
      sig = await signals.first;
      ctx.stderr.write(`sluice serve: ${sig}: shutting down\n`);
      await server.close();
    } finally {
      signals.dispose();
      await engine.close();
    }
    ctx.stderr.write('sluice serve: stopped\n');
    return stoppedBy(sig);
  },
};
