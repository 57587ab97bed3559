/**
 * `sluice replay <session> [--json] [--model] [--store DIR]`: the calls of a
 * session rebuilt from its event log, without running any tool and without
 * writing to the store. Prints each surviving call's final display (never the
 * live display deltas), or its model view with --model.
 */

import { BadArgumentsError } from '../engine/protocol/errors.js';
import { openReplay, type ReplayedCall } from '../engine/sessions/replay.js';
import { writeJsonWithArray } from '../server/json-stream.js';
import {
  type Command,
  EXIT_OK,
  forTerminal,
  HELP_OPTION,
  openExistingStore,
  parseCommandLine,
  STORE_OPTION,
  writeOut,
} from './common.js';

const USAGE = `Usage: sluice replay <session> [--json] [--model] [--store DIR]

Rebuilds the calls of a session from its event log, in order, without running
any tool and without writing anything. Reverted calls are not shown; a call
whose process died before it finished is shown as interrupted.

  <session>      the session id
  --model        print each call's model view instead of its final display
  --json         print { session, calls: [{ callId, tool, args, result, interrupted }],
                 reverted, corruptLines, skippedLines }
  --store DIR    the store (default: $SLUICE_STORE, else ./.sluice)
`;

const OPTIONS = {
  json: { type: 'boolean' },
  model: { type: 'boolean' },
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

function heading(c: ReplayedCall): string {
  const r = c.result;
  const state = c.interrupted ? 'interrupted' : r.complete ? r.status : `${r.status}, incomplete`;
  // Tool names and call ids come from the log, which anyone with write access to the store can shape.
  const sandbox = r.sandbox ? `, sandbox ${r.sandbox.filesystem}, network ${r.sandbox.network}` : '';
  return `── ${c.tool} ${c.callId} (${state}${sandbox})`;
}

/** The `replay` command. */
export const command: Command = {
  summary: 'rebuild the calls of a session from its event log (final display or model view)',
  usage: USAGE,
  options: OPTIONS,
  positionals: [{ name: '<session>', complete: 'session' }],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'replay');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length !== 1) {
      throw new BadArgumentsError(`sluice replay takes exactly one <session>, got ${positionals.length}`);
    }
    const store = await openExistingStore(values.store, ctx.env);
    // One call at a time, read back from the log (see openReplay).
    const { calls, close, ...replayed } = await openReplay(store, positionals[0] as string);
    try {
      if (values.json) {
        const write = async (text: string) => {
          await writeOut(ctx.stdout, text);
          return true;
        };
        await writeJsonWithArray(write, replayed, 'calls', calls());
        await writeOut(ctx.stdout, '\n');
      } else {
        let separator = '';
        for await (const c of calls()) {
          const body = values.model ? c.result.model : c.result.display;
          const text = forTerminal(ctx.stdout, body);
          const block = `${forTerminal(ctx.stdout, heading(c))}\n${text}${text.endsWith('\n') || text.length === 0 ? '' : '\n'}`;
          await writeOut(ctx.stdout, separator + block);
          separator = '\n';
        }
      }
    } finally {
      await close();
    }
    if (replayed.corruptLines > 0) {
      ctx.stderr.write(`${replayed.corruptLines} torn or corrupt log lines were skipped\n`);
    }
    return EXIT_OK;
  },
};
