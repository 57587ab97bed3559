/**
 * `sluice verify [--repair] [--json] [--store DIR]`: hash every blob, list
 * corrupt ones, blobs that manifests reference but the store lacks, and
 * packs whose index cannot be read. Exit 1 when any list is non-empty.
 * Removes nothing; `--repair` moves corrupt blobs to quarantine/.
 */
import { sanitizeForTerminal } from '../engine/presentation/sanitize.js';
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { verifyWithSessions } from '../engine/sessions/verify-references.js';
import {
  type Command,
  EXIT_FAILURE,
  EXIT_OK,
  HELP_OPTION,
  openExistingStore,
  parseCommandLine,
  STORE_OPTION,
  writeOut,
} from './common.js';

const USAGE = `Usage: sluice verify [--repair] [--json] [--store DIR]

Hashes every blob in the store and compares it with its name, and checks that
every blob a manifest references is present, and that every blob a live call
of a session log references is present. Removes nothing.
Exits 1 when anything is corrupt or missing, or a pack's index is unreadable
(an S3 store: its blobs cannot be checked, and sluice gc refuses to run).

  --repair       move corrupt blobs to quarantine/ in the store: they are then
                 missing instead of wrong, and the next publish of the same
                 content puts a good copy in place
  --json         print { scanned, ok, corrupt, missing, tombstoned, unexpected, quarantined,
                 repairFailed, unreadablePacks, records, corruptLines }
  --store DIR    the store (default: $SLUICE_STORE, else ./.sluice)
`;

const OPTIONS = { repair: { type: 'boolean' }, json: { type: 'boolean' }, ...STORE_OPTION, ...HELP_OPTION } as const;

/** The `verify` command. */
export const command: Command = {
  summary: 'check every blob against its digest; list corrupt and missing blobs',
  usage: USAGE,
  options: OPTIONS,
  positionals: [],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'verify');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    if (positionals.length > 0) {
      throw new BadArgumentsError(`sluice verify takes no arguments, got ${JSON.stringify(positionals[0])}`);
    }
    const store = await openExistingStore(values.store, ctx.env);
    const report = await verifyWithSessions(store, { repair: values.repair === true });
    if (values.json) {
      await writeOut(ctx.stdout, `${JSON.stringify(report)}\n`);
    } else {
      const lines = [
        `${report.scanned} ${report.scanned === 1 ? 'blob' : 'blobs'} scanned: ${report.ok} ok, ` +
          `${report.corrupt.length} corrupt, ${report.missing.length} missing`,
        ...report.corrupt.map((d) => `corrupt ${d}`),
        ...report.quarantined.map((q) => `quarantined quarantine/${q}`),
        ...report.repairFailed.map((f) => `not quarantined ${sanitizeForTerminal(f)}`),
        ...report.missing.map((d) => `missing ${d}`),
        ...report.unreadablePacks.map((p) => `unreadable pack index ${sanitizeForTerminal(p)}`),
        ...report.tombstoned.map(
          (d) => `tombstoned ${d} (moved aside by a collection; readable, put back by the next sluice gc)`,
        ),
        // File names under blobs/ and call ids in logs are not ours to trust on a terminal.
        ...report.unexpected.map((p) => `unexpected ${sanitizeForTerminal(p)} (not a blob name; left alone)`),
        ...report.records.map(
          (r) => `record ${r.session}/${sanitizeForTerminal(r.callId)} references missing ${r.role} ${r.digest}`,
        ),
      ];
      if (report.corruptLines > 0) lines.push(`${report.corruptLines} torn or corrupt session log lines (skipped)`);
      await writeOut(ctx.stdout, `${lines.join('\n')}\n`);
    }
    const failed =
      report.corrupt.length > 0 ||
      report.missing.length > 0 ||
      report.records.length > 0 ||
      report.unreadablePacks.length > 0;
    return failed ? EXIT_FAILURE : EXIT_OK;
  },
};
