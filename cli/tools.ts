/**
 * `sluice tools [--json] [-q] [--config FILE] [--plugin PATH]... [--mcp NAME=COMMAND]...`:
 * the tools a call can name: the built-ins and those the configuration adds,
 * each with its description and arguments. Never creates a store: without
 * one it runs on a throwaway store in the system temporary directory.
 */
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../engine/engine.js';
import { BadArgumentsError } from '../engine/protocol/errors.js';
import type { ToolInfo } from '../engine/registry.js';
import {
  type Command,
  chosenStore,
  EXIT_OK,
  forTerminal,
  HELP_OPTION,
  parseCommandLine,
  RUN_CONFIG_OPTIONS,
  STORE_OPTION,
  writeOut,
} from './common.js';
import { applyConfig, loadRunConfig } from './config.js';

const USAGE = `Usage: sluice tools [--json] [-q] [--store DIR] [--config FILE] [--plugin PATH]... [--mcp NAME=COMMAND]...
                    [--sandbox MODE] [--network MODE]

Lists the tools sluice run (and sluice serve) can call: the built-ins, and
those --config, --plugin and --mcp add, with each one's description and
arguments.

  --json, -j      print { tools: [{ name, description, source, output, selfPaginating,
                  argsSchema }] } (GET /v1/tools; argsSchema is the JSON Schema)
  --quiet, -q     print only the names, one a line
  --store DIR     the store (default: $SLUICE_STORE, else ./.sluice; none is created)
  --config FILE   a config file, as for sluice run
  --plugin PATH   register a plugin tool module (repeatable)
  --mcp NAME=COMMAND [ARGS]
                  start an MCP server over stdio; its tools are NAME.<tool> (repeatable)
  --sandbox MODE  the sandbox whose policy bash's description states (workspace-write, read-only, off)
  --network MODE  off or on, with --sandbox
`;

const OPTIONS = {
  json: { type: 'boolean', short: 'j' },
  quiet: { type: 'boolean', short: 'q' },
  ...RUN_CONFIG_OPTIONS,
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

interface JsonSchemaObject {
  properties?: Record<string, { type?: unknown; description?: unknown }>;
  required?: unknown;
}

/** One line per argument: name, type, whether required, description. */
function argumentLines(schema: unknown): string[] {
  const s = (schema ?? {}) as JsonSchemaObject;
  const props = Object.entries(s.properties ?? {});
  if (props.length === 0) return ['  args: none'];
  const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
  const width = Math.max(...props.map(([n]) => n.length));
  const kinds = props.map(([n, p]) => {
    const type = Array.isArray(p.type) ? p.type.join('|') : typeof p.type === 'string' ? p.type : 'any';
    return `${type}${required.has(n) ? ', required' : ''}`;
  });
  const kindWidth = Math.max(...kinds.map((k) => k.length));
  return [
    '  args:',
    ...props.map(([n, p], i) => {
      const description = typeof p.description === 'string' ? `  ${p.description}` : '';
      return `    ${n.padEnd(width)}  ${(kinds[i] as string).padEnd(kindWidth)}${description}`.trimEnd();
    }),
  ];
}

/** The human listing of `tools`. */
export function renderTools(tools: readonly ToolInfo[]): string {
  return tools
    .map((t) => [`${t.name} (${t.source})`, `  ${t.description}`, ...argumentLines(t.argsSchema)].join('\n'))
    .join('\n\n')
    .concat('\n');
}

/** The store to open: the chosen one when it exists, else a throwaway one (listing tools writes nothing). */
async function storeFor(explicit: string | undefined, env: NodeJS.ProcessEnv) {
  const { locator: dir, exists } = await chosenStore(explicit, env);
  if (exists) return { dir, dispose: async () => {} };
  const scratch = await fsp.mkdtemp(join(tmpdir(), 'sluice-tools-'));
  return { dir: scratch, dispose: () => fsp.rm(scratch, { recursive: true, force: true }) };
}

/** The `tools` command. */
export const command: Command = {
  summary: 'list the tools a call can name, with descriptions and arguments (--json: their schemas)',
  usage: USAGE,
  options: OPTIONS,
  positionals: [],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'tools');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length > 0) {
      throw new BadArgumentsError(`sluice tools takes no positional arguments, got ${JSON.stringify(positionals[0])}`);
    }
    if (values.json && values.quiet) throw new BadArgumentsError('--json and --quiet cannot be used together');
    const extra = await loadRunConfig(values, process.cwd());
    const store = await storeFor(values.store, ctx.env);
    let tools: ToolInfo[];
    try {
      const engine = await Engine.open({
        store: store.dir,
        concurrency: 1,
        minThreads: 1,
        ...(extra.engine.sandbox ? { sandbox: extra.engine.sandbox } : {}),
      });
      try {
        await applyConfig(engine, extra);
        tools = engine.tools();
      } finally {
        await engine.close();
      }
    } finally {
      await store.dispose();
    }
    if (values.quiet) {
      await writeOut(ctx.stdout, tools.map((t) => `${t.name}\n`).join(''));
    } else if (values.json) {
      const body = tools.map(({ name, description, source, output, selfPaginating, argsSchema }) => ({
        name,
        description,
        source,
        output,
        selfPaginating,
        argsSchema,
      }));
      await writeOut(ctx.stdout, `${JSON.stringify({ tools: body })}\n`);
    } else {
      await writeOut(ctx.stdout, forTerminal(ctx.stdout, renderTools(tools)));
    }
    return EXIT_OK;
  },
};
