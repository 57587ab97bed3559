/**
 * `sluice revert <session> <callId> [--json] [--store DIR]`: reverts a
 * session to before one of its calls. That call and every later live call
 * stop being replayed and stop being GC roots (docs/operations.md, "Revert");
 * their artifacts stay readable until a GC collects them.
 */
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { revertSession } from '../engine/sessions/catalog.js';
import { SessionRecorder } from '../engine/sessions/recorder.js';
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

const USAGE = `Usage: sluice revert <session> <callId> [--json] [--store DIR]

Reverts a session to before one of its calls: that call and every later live
call are hidden from replay and no longer keep their artifacts from sluice gc.
The revert is one durable record appended to the session's event log.

  <session>       the session id (see sluice sessions)
  <callId>        a live call of the session (see sluice replay <session> --json)
  --json, -j      print { session, reverted: [callId...] }
  --store DIR     the store (default: $SLUICE_STORE, else ./.sluice)

Exit status: 0 reverted, 1 unknown session or call (ENOTFOUND), 2 bad usage.
`;

const OPTIONS = {
  json: { type: 'boolean', short: 'j' },
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

/** The `revert` command. */
export const command: Command = {
  summary: 'revert a session to before one of its calls (hidden from replay, no longer GC roots)',
  usage: USAGE,
  options: OPTIONS,
  positionals: [
    { name: '<session>', complete: 'session' },
    { name: '<callId>', complete: 'none' },
  ],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'revert');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length !== 2) {
      throw new BadArgumentsError(
        `sluice revert takes a <session> and a <callId>, got ${positionals.length} arguments (see sluice revert --help)`,
      );
    }
    const [session, callId] = positionals as [string, string];
    const store = await openExistingStore(values.store, ctx.env);
    const recorder = new SessionRecorder(store);
    try {
      const result = await revertSession(store, recorder, session, callId);
      const n = result.reverted.length;
      await writeOut(
        ctx.stdout,
        values.json
          ? `${JSON.stringify(result)}\n`
          : forTerminal(
              ctx.stdout,
              `reverted ${n} call${n === 1 ? '' : 's'} of ${session}: ${result.reverted.join(', ')}\n`,
            ),
      );
    } finally {
      await recorder.close();
    }
    return EXIT_OK;
  },
};
