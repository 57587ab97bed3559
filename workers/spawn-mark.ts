/**
 * Finding the processes a dead spawn helper started. Each gets
 * `SLUICE_SPAWN_MARK=<mark>` (one mark per helper, inherited by
 * descendants); a helper killed before reporting a pid leaves a process
 * nothing else knows of, so its thread scans /proc/<pid>/environ (fixed at
 * exec) for the mark and kills every group it finds. Imports only Node: the
 * helper and the worker threads both use it.
 */
import { promises as fsp } from 'node:fs';

/** The environment variable carrying a helper's mark. */
export const SPAWN_MARK_VAR = 'SLUICE_SPAWN_MARK';

/** /proc entries read at once while scanning. */
const SCAN_BATCH = 64;

/** Pids of the processes whose environment holds `SLUICE_SPAWN_MARK=<mark>` (Linux; none elsewhere). */
async function markedPids(mark: string): Promise<number[]> {
  const entry = Buffer.from(`${SPAWN_MARK_VAR}=${mark}\0`);
  const inside = Buffer.concat([Buffer.from([0]), entry]);
  let names: string[];
  try {
    names = (await fsp.readdir('/proc')).filter((n) => /^\d+$/.test(n));
  } catch {
    return [];
  }
  const found: number[] = [];
  for (let i = 0; i < names.length; i += SCAN_BATCH) {
    await Promise.all(
      names.slice(i, i + SCAN_BATCH).map(async (name) => {
        try {
          const env = await fsp.readFile(`/proc/${name}/environ`);
          if (env.subarray(0, entry.length).equals(entry) || env.includes(inside)) found.push(Number(name));
        } catch {
          // Gone, or not ours to read (another user's process carries no mark of ours).
        }
      }),
    );
  }
  return found;
}

/** How long callers wait for a scan: reading environ can block on a process stuck in the kernel. */
const SCAN_TIMEOUT_MS = 10_000;

/**
 * SIGKILLs every process carrying `mark`, and the group of each leader;
 * resolves with how many it found, or -1 past {@link SCAN_TIMEOUT_MS} (the
 * scan goes on in the background).
 */
export async function killMarked(mark: string): Promise<number> {
  const found = markedPids(mark).then(killAll);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<number>((resolve) => {
    timer = setTimeout(() => resolve(-1), SCAN_TIMEOUT_MS);
    timer.unref();
  });
  try {
    return await Promise.race([found, late]);
  } finally {
    clearTimeout(timer);
  }
}

function killAll(pids: number[]): number {
  for (const pid of pids) {
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // Not a group leader, or already gone.
      }
    }
  }
  return pids.length;
}
