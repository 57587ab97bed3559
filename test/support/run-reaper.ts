/**
 * What cleans up after a test run that never reached its teardown. vitest
 * stopped by SIGTERM or SIGKILL skips the global teardown, which would have
 * stopped the run's Ceph cluster and queue server (test/support/service.ts)
 * and removed the run's directory: the daemons went on running with nobody
 * to stop them.
 *
 * The reaper is a shell of its own process group whose stdin is a pipe from
 * this process. When this process ends, however it ends, the kernel closes
 * the pipe's write end, the shell's `cat` reads end-of-file, and it runs
 * `.ci/s3-down.sh` on the run's cluster and `.ci/queue-down.sh` on its queue
 * server (each a no-op when there is none; each signals only daemons whose
 * command line names that instance's config file) and removes the run's
 * directory. No timer and no polling: the end of this process is
 * the signal. A teardown that did its work disarms the reaper.
 */
import { spawn } from 'node:child_process';
import { CEPH } from './ceph.js';
import { NATS } from './queue.js';
import { scriptPath, serviceDir } from './service.js';

/** How the reaper for `runDir` is started (its cluster at `runDir/s3`, its queue server at `runDir/queue`): exported for its test. */
export function reaperCommand(runDir: string): { file: string; args: string[] } {
  const down = [CEPH, NATS].flatMap((svc) => [scriptPath(svc.down), serviceDir(svc, runDir)]);
  return {
    file: 'sh',
    args: [
      '-c',
      'cat >/dev/null; bash "$0" "$1" >/dev/null 2>&1; bash "$2" "$3" >/dev/null 2>&1; rm -rf "$4"',
      ...down,
      runDir,
    ],
  };
}

/**
 * Starts the reaper for `runDir`. Returns the function that disarms it,
 * once the teardown has done the same work.
 */
export function startRunReaper(runDir: string): () => void {
  const { file, args } = reaperCommand(runDir);
  const child = spawn(file, args, {
    stdio: ['pipe', 'ignore', 'ignore'],
    // Its own group: a Ctrl-C aimed at the terminal's foreground group must not end it before the runner.
    detached: true,
  });
  // Neither the pipe nor the child keeps this process alive: the reaper waits for this process, not the reverse.
  child.stdin?.on('error', () => {});
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  child.unref();
  return () => {
    if (child.pid === undefined || child.exitCode !== null) return;
    try {
      // The whole group: the shell and its `cat`.
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
}
