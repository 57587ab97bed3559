/**
 * `sluice sessions [--json] [-q] [--store DIR]`: the sessions of a store,
 * with their calls, last activity and the bytes their live calls reference.
 * Reads the event logs only: no worker, nothing written.
 */
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { formatBytes } from '../engine/protocol/units.js';
import { listSessions, type SessionSummary } from '../engine/sessions/catalog.js';
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

const USAGE = `Usage: sluice sessions [--json] [-q] [--store DIR]

Lists the sessions of the store: live calls, reverted and interrupted ones,
the bytes of the artifacts the live calls reference (what sluice gc keeps for
the session), the size of the event log and its last change.

  --json, -j      print { sessions: [{ id, calls, reverted, interrupted, corruptLines, bytes,
                  referencedBytes, updatedAt }] } (GET /v1/sessions)
  --quiet, -q     print only the ids, one a line
  --store DIR     the store (default: $SLUICE_STORE, else ./.sluice)
`;

const OPTIONS = {
  json: { type: 'boolean', short: 'j' },
  quiet: { type: 'boolean', short: 'q' },
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

const HEADERS = ['SESSION', 'CALLS', 'REVERTED', 'INTERRUPTED', 'REFERENCED', 'LOG', 'LAST ACTIVITY'] as const;

/** The table of `sessions`: a header, then one row each; numbers right-aligned. */
export function renderSessions(sessions: readonly SessionSummary[]): string {
  const rows = sessions.map((s) => [
    s.id,
    String(s.calls),
    String(s.reverted),
    String(s.interrupted),
    formatBytes(s.referencedBytes),
    formatBytes(s.bytes),
    s.updatedAt,
  ]);
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) =>
        i === 0 || i === cells.length - 1 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number),
      )
      .join('  ')
      .trimEnd();
  return `${[line(HEADERS), ...rows.map(line)].join('\n')}\n`;
}

/** The `sessions` command. */
export const command: Command = {
  summary: 'list the sessions: calls, last activity, bytes referenced',
  usage: USAGE,
  options: OPTIONS,
  positionals: [],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'sessions');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length > 0) {
      throw new BadArgumentsError(
        `sluice sessions takes no positional arguments, got ${JSON.stringify(positionals[0])}`,
      );
    }
    if (values.json && values.quiet) throw new BadArgumentsError('--json and --quiet cannot be used together');
    const store = await openExistingStore(values.store, ctx.env);
    const sessions = await listSessions(store);
    if (values.json) await writeOut(ctx.stdout, `${JSON.stringify({ sessions })}\n`);
    else if (values.quiet) await writeOut(ctx.stdout, sessions.map((s) => `${s.id}\n`).join(''));
    else if (sessions.length === 0) ctx.stderr.write(`sluice sessions: no sessions in ${store.root}\n`);
    else await writeOut(ctx.stdout, forTerminal(ctx.stdout, renderSessions(sessions)));
    return EXIT_OK;
  },
};
