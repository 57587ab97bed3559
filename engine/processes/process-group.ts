/**
 * Killing the process groups tools register. One place for the rule of which
 * pids are real groups: kill(-0) would signal the engine's own group and
 * kill(-1) every process it may signal, so those (and the engine's own pid,
 * and anything not a positive integer) are never accepted.
 */

/** True when `pid` may be treated as a tool's process group. */
export function isToolProcessGroup(pid: unknown): pid is number {
  return typeof pid === 'number' && Number.isSafeInteger(pid) && pid > 1 && pid !== process.pid;
}

/** SIGKILLs the group led by `pid` (synchronous; a group already gone is the normal case). */
export function killProcessGroup(pid: number): void {
  if (!isToolProcessGroup(pid)) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}
