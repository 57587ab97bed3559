/**
 * The watchdog's stamps under dash (/bin/sh) with an odd /proc/uptime: a
 * `+` line's stamp is the time since boot in clock ticks, taken only from the
 * kernel's `<seconds>.<2 digits>`; anything else (no fraction, another
 * precision, junk, nothing) leaves the line unstamped, so the reaper does
 * not kill that group rather than trust a made-up tick (a stamp too late
 * would let a reused pid's group look old enough to kill). Each case
 * runs the real script in a mount namespace of its own with a file bound
 * over /proc/uptime (root only).
 */
import { spawn, spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readJournal } from '../../engine/processes/orphans.js';
import { WATCHDOG_NAME, WATCHDOG_SCRIPT } from '../../engine/processes/process-guard.js';
import { tempDir } from '../store/helpers.js';
import { eventually } from '../support/lifecycle-host.js';

/** Why the cases cannot run here, or undefined when they can. */
function unavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root';
  const probe = spawnSync('unshare', ['-m', '/bin/sh', '-c', 'mount --bind /proc/uptime /proc/uptime'], {
    stdio: 'ignore',
  });
  return probe.status === 0 ? undefined : 'unshare -m with a bind mount fails';
}
const why = unavailable();
if (why) console.log(`watchdog-uptime: the odd /proc/uptime cases did not run: ${why}`);

/** A group id no process has: the lines track and untrack it, so the watchdog kills nothing at its end. */
const NOBODY = 999_999_998;

/** The journal lines the real watchdog writes for `+NOBODY` and `-NOBODY` with `uptime` as /proc/uptime. */
async function linesWith(uptime: string): Promise<string[]> {
  const dir = await tempDir();
  const fake = join(dir, 'uptime');
  const journal = join(dir, 'journal.pgids');
  await fsp.writeFile(fake, uptime);
  const child = spawn(
    'unshare',
    [
      '-m',
      '/bin/sh',
      '-c',
      'mount --bind "$1" /proc/uptime && exec /bin/sh -c "$2" "$3" "$4" "$5"',
      'sh',
      fake,
      WATCHDOG_SCRIPT,
      WATCHDOG_NAME,
      String(process.pid),
      journal,
    ],
    { stdio: ['pipe', 'ignore', 'ignore'] },
  );
  const exited = new Promise((r) => child.once('exit', r));
  child.stdin.write(`+${NOBODY}\n-${NOBODY}\n`);
  const read = async () => (await fsp.readFile(journal, 'utf8').catch(() => '')).split('\n').filter(Boolean);
  expect(await eventually(async () => (await read()).length === 2)).toBe(true);
  const lines = await read();
  child.stdin.end();
  await exited;
  // The watchdog removes its journal when the engine's pipe ends.
  expect(await fsp.readdir(dir)).toEqual(['uptime']);
  return lines;
}

describe.runIf(why === undefined)('the watchdog stamps only what /proc/uptime says in its own form', () => {
  it('seconds with two decimals become clock ticks', async () => {
    // Only a `+` line needs its time (the reaper bounds a group by it), so a `-` line is not stamped.
    expect(await linesWith('12345.67 54321.00\n')).toEqual([`+${NOBODY} 1234567`, `-${NOBODY}`]);
    expect(await linesWith('0.05 0.01\n')).toEqual([`+${NOBODY} 005`, `-${NOBODY}`]);
    expect(readJournal(`+${NOBODY} 005\n`)).toEqual([{ pgid: NOBODY, ticks: 5 }]);
  });

  it('no fraction, another precision, junk or nothing: the line goes unstamped', async () => {
    for (const odd of ['12345 1\n', '12345.678 1\n', '12345.6 1\n', '1.2.34 1\n', 'abc.de 1\n', '', '\n']) {
      expect({ odd, lines: await linesWith(odd) }).toEqual({ odd, lines: [`+${NOBODY}`, `-${NOBODY}`] });
    }
  });
});
