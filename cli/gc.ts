/**
 * `sluice gc [--grace SECONDS] [--dry-run] [--json] [--store DIR]`: collect
 * blobs that no live session record or pin references and that are older
 * than the grace period; reclaim temporary files and pins of dead processes.
 * Safe while other processes publish.
 */

import { BadArgumentsError } from '../engine/protocol/errors.js';
import { formatBytes } from '../engine/protocol/units.js';
import { collectGarbage, DEFAULT_GC_GRACE_MS, type GcReport } from '../engine/sessions/gc.js';
import {
  type Command,
  EXIT_OK,
  HELP_OPTION,
  openExistingStore,
  parseCommandLine,
  STORE_OPTION,
  writeOut,
} from './common.js';

const USAGE = `Usage: sluice gc [--grace SECONDS] [--dry-run] [--json] [--store DIR]

Removes blobs that no live call of any session references and no live
process has pinned, once they are older than the grace period (and keeps
whatever a young manifest references). Reclaims temporary files and pins
left by dead processes. Safe while other processes run calls.

  --grace SECONDS  blobs younger than this survive (default ${DEFAULT_GC_GRACE_MS / 1000})
  --dry-run        report what would be removed; change nothing
  --json           print the report as JSON
  --store DIR      the store (default: $SLUICE_STORE, else ./.sluice)
`;

const OPTIONS = {
  grace: { type: 'string' },
  'dry-run': { type: 'boolean' },
  json: { type: 'boolean' },
  ...STORE_OPTION,
  ...HELP_OPTION,
} as const;

function parseGrace(value: string | undefined): number {
  if (value === undefined) return DEFAULT_GC_GRACE_MS;
  if (!/^[0-9]+(\.[0-9]+)?$/.test(value)) {
    throw new BadArgumentsError(`--grace must be a non-negative number of seconds, got ${JSON.stringify(value)}`, {
      grace: value,
    });
  }
  return Math.round(Number(value) * 1000);
}

function summary(r: GcReport): string {
  const verb = r.dryRun ? 'would remove' : 'removed';
  return [
    `${r.scanned} blobs scanned: ${r.kept} kept, ${verb} ${r.removed} (${formatBytes(r.bytesFreed)})`,
    `roots ${r.roots}, pinned ${r.pinned}, inside the grace period ${r.young}, restored ${r.restored}`,
    `temporary files reclaimed ${r.tmpReclaimed} (${formatBytes(r.tmpBytesReclaimed)}), pins reclaimed ${r.pinsReclaimed}`,
  ].join('\n');
}

/** The `gc` command. */
export const command: Command = {
  summary: 'collect unreferenced blobs older than the grace period; reclaim files of dead processes',
  usage: USAGE,
  options: OPTIONS,
  positionals: [],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'gc');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length > 0) {
      throw new BadArgumentsError(`sluice gc takes no arguments, got ${JSON.stringify(positionals[0])}`);
    }
    const graceMs = parseGrace(values.grace);
    const store = await openExistingStore(values.store, ctx.env);
    const report = await collectGarbage(store, { graceMs, dryRun: values['dry-run'] === true });
    await writeOut(ctx.stdout, values.json ? `${JSON.stringify(report)}\n` : `${summary(report)}\n`);
    return EXIT_OK;
  },
};
