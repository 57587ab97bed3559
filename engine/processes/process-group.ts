/** Killing the process groups tools register: kill(-0) and kill(-1) would signal far more than a tool's group, so only positive pids other than the engine's are groups. */

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
