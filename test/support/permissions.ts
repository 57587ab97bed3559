/**
 * Running a command so that file permissions stop it. Root passes every
 * permission check through CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so a
 * test that makes a path unreadable runs the command as root without those
 * two capabilities (`setpriv --bounding-set`, util-linux): it stays the owner
 * of every file the test made, so the checkout and the test's directory stay
 * readable wherever they live (a 0700 clone in /root included), and only the
 * path the test closed with `chmod 0` is refused. Another user (such as
 * `nobody`) would need every directory above the checkout to be open to it.
 */
import { execFileSync } from 'node:child_process';

const DROP = ['--bounding-set=-dac_override,-dac_read_search', '--'];

/** How to run a command that permissions apply to: an argv prefix, or why it cannot be done here. */
export type PermissionsRoute = { prefix: string[] } | { reason: string };

function probe(): PermissionsRoute {
  if (process.platform === 'win32') return { reason: 'file modes do not apply on Windows' };
  if (process.getuid?.() !== 0) return { prefix: [] };
  try {
    // The probe reads the capability set it got: a setpriv that ran but kept the capabilities is no route.
    const status = execFileSync('setpriv', [...DROP, 'cat', '/proc/self/status'], { encoding: 'utf8' });
    const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    // Bits 1 and 2: CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH.
    if (eff === undefined || (BigInt(`0x${eff}`) & 0b110n) !== 0n) {
      return { reason: 'setpriv ran but the DAC capabilities stayed' };
    }
    return { prefix: ['setpriv', ...DROP] };
  } catch (err) {
    return { reason: `root cannot drop CAP_DAC_OVERRIDE here (setpriv: ${(err as Error).message.split('\n')[0]})` };
  }
}

/** Probed once per test file that asks. */
export const permissionsRoute: PermissionsRoute = probe();
