/**
 * Test-only crash injection. With `SLUICE_CRASH_AT=<step>[:<n>]` in the
 * environment, the process kills itself with SIGKILL the n-th time (default:
 * the first) it reaches `<step>`, so a test can stop a real process between
 * the durable steps of a publication and check what a restart finds.
 *
 * The variable is read once, when this module loads; when it is unset,
 * {@link crashPoint} is one comparison and a return.
 *
 * Steps, in publication order (docs/operations.md):
 * - `capture-written`: a capture file is complete and fsynced in tmp/ and its
 *   digest is in the publication pin, but it is not renamed into blobs/ yet.
 * - `blob-renamed`: a blob has been placed at its content address.
 * - `manifest-renamed`: a call's stream manifest has been placed.
 * - `pack-written`: a batch of small blobs is written to the store's pack, not
 *   fdatasynced yet (its publishes have not returned).
 * - `pack-synced`: that batch is durable; its publishes have not returned.
 * - `repack-copied`: a collection has copied the live blobs of the packs it
 *   repacks into a new pack (durable), and moved nothing aside yet.
 * - `repack-tombstoned`: it has moved those packs aside, not deleted them.
 * - `record-appended`: the terminal record is in the session log and fsynced,
 *   and the publication pin is not released yet.
 */

/** The points where a crash can be injected. */
export type CrashStep =
  | 'capture-written'
  | 'blob-renamed'
  | 'manifest-renamed'
  | 'pack-written'
  | 'pack-synced'
  | 'repack-copied'
  | 'repack-tombstoned'
  | 'record-appended';

const CRASH_STEPS: readonly CrashStep[] = [
  'capture-written',
  'blob-renamed',
  'manifest-renamed',
  'pack-written',
  'pack-synced',
  'repack-copied',
  'repack-tombstoned',
  'record-appended',
];

function parse(value: string | undefined): { step: CrashStep; remaining: number } | undefined {
  if (!value) return undefined;
  const [step, nth] = value.split(':');
  if (!CRASH_STEPS.includes(step as CrashStep)) return undefined;
  const n = nth === undefined ? 1 : Number(nth);
  return { step: step as CrashStep, remaining: Number.isInteger(n) && n > 0 ? n : 1 };
}

const armed = parse(process.env.SLUICE_CRASH_AT);

/** Kills this process with SIGKILL when `SLUICE_CRASH_AT` names `step` and this is its n-th arrival. */
export function crashPoint(step: CrashStep): void {
  if (armed === undefined || armed.step !== step) return;
  armed.remaining--;
  if (armed.remaining === 0) process.kill(process.pid, 'SIGKILL');
}
