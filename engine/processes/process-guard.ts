/**
 * Tool processes must not outlive their engine, even when the engine dies by
 * SIGKILL and can run no code of its own. Each engine starts one small
 * watchdog process (`/bin/sh`, about 1 MiB) the first time a call registers
 * a process group, in a session of its own (so signals aimed at the
 * engine's terminal or process group do not reach it). The engine tells it
 * over a pipe which groups to track (`+<pgid>`) and untrack (`-<pgid>`);
 * when the pipe reaches end of file (the engine closed it, or the kernel did
 * because the engine died, however it died) the watchdog SIGKILLs every
 * group it still tracks and exits.
 *
 * The watchdog also appends each line to a journal in the store
 * (`procs/<engine pid>-<token>.pgids`), each `+` line stamped with the time
 * since boot it was written (`+<pgid> <ticks>`, from /proc/uptime, in the
 * clock ticks of /proc/<pid>/stat start times; only from the kernel's
 * `<seconds>.<2 digits>`, anything else leaves the line unstamped rather
 * than make up a tick that could be too late; the reaper bounds a group by
 * its `+` line, and nothing reads a `-` line's time), so that if it dies
 * with the engine (both killed at once), the next engine opened on the
 * store, or the next collection, kills what the journal still lists
 * (engine/processes/orphans.ts). The
 * engine removes the journal when it closes.
 *
 * Per call this costs the engine two short writes on a pipe (and, once per
 * engine, one process spawn); the watchdog's side (reading the lines,
 * appending the journal) runs in its own process.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { ownedName } from '../../store/owners.js';
import { isToolProcessGroup } from './process-group.js';

/** The name the watchdog runs under (its `$0`): what `ps` and tests see. */
export const WATCHDOG_NAME = 'sluice-watchdog';

/**
 * The watchdog: `$1` is the engine's pid (for `ps`), `$2` the journal path
 * (may be empty). A group is tracked while its last line was `+`. Signals
 * meant for the engine's terminal or for a service being stopped are
 * ignored: its job is to outlive the engine by the moment it takes to kill.
 * @internal exported for tests, which run it with another /proc/uptime
 */
export const WATCHDOG_SCRIPT = `trap '' HUP INT QUIT TERM PIPE
umask 077
j=$2
g=' '
while IFS= read -r l; do
  case $l in
    +[0-9]*) x=\${l#+}; case $g in *" $x "*) ;; *) g="$g$x " ;; esac ;;
    -[0-9]*) x=\${l#-}; case $g in *" $x "*) g="\${g%% "$x" *} \${g#* "$x" }" ;; esac ;;
    *) continue ;;
  esac
  if [ -n "$j" ]; then
    t=
    case $l in +*)
      u=; read -r u _ </proc/uptime 2>/dev/null
      case $u in *[!0-9.]*|*.*.*) ;; [0-9]*.[0-9][0-9]) t=\${u%.*}\${u#*.} ;; esac ;;
    esac
    printf '%s\\n' "$l\${t:+ $t}" 2>/dev/null >>"$j"
  fi
done
for x in $g; do kill -9 "-$x" 2>/dev/null; done
[ -n "$j" ] && rm -f "$j"
exit 0
`;

/** How long {@link ProcessGuard.close} waits for the watchdog to exit before killing it. */
const CLOSE_WAIT_MS = 2000;

/** The process groups of one engine's calls, as its watchdog knows them. */
export class ProcessGuard {
  private readonly journalDir: string | undefined;
  private readonly journalPath: string | undefined;
  /** Registrations per group (two calls never share a live group; a tool may register one twice). */
  private readonly groups = new Map<number, number>();
  private watchdog: { child: ChildProcess; stdin: Writable; exited: Promise<void> } | undefined;
  private closed = false;

  /** `journalDir`: the store's `procs/` directory (omitted: no journal, the watchdog alone). */
  constructor(journalDir?: string) {
    this.journalDir = journalDir;
    this.journalPath = journalDir && join(journalDir, `${ownedName()}.pgids`);
  }

  /** Number of groups tracked now. */
  get size(): number {
    return this.groups.size;
  }

  /** The watchdog's pid, once one runs. @internal for tests */
  get watchdogPid(): number | undefined {
    return this.watchdog?.child.pid;
  }

  /** Tracks group `pgid` (a tool's group, see process-group.ts) until {@link untrack}. */
  track(pgid: number): void {
    if (!isToolProcessGroup(pgid)) return;
    const n = this.groups.get(pgid) ?? 0;
    this.groups.set(pgid, n + 1);
    if (n === 0) this.send(`+${pgid}\n`);
  }

  /** Ends one registration of `pgid` (the engine has killed it). */
  untrack(pgid: number): void {
    const n = this.groups.get(pgid);
    if (n === undefined) return;
    if (n > 1) {
      this.groups.set(pgid, n - 1);
      return;
    }
    this.groups.delete(pgid);
    // Nothing to tell a watchdog that is not running: it would have nothing to kill.
    if (this.watchdog) this.send(`-${pgid}\n`);
  }

  /**
   * Ends the watchdog (it kills what is still tracked: nothing, once every
   * call has ended) and removes the journal. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const w = this.watchdog;
    this.watchdog = undefined;
    if (w) {
      // Waited for with a referenced handle: the host may have nothing else keeping it alive.
      w.child.ref();
      w.stdin.end();
      const timer = setTimeout(() => w.child.kill('SIGKILL'), CLOSE_WAIT_MS);
      await w.exited;
      clearTimeout(timer);
    }
    // After the watchdog's exit, so no late append can create it again.
    if (this.journalPath) rmSync(this.journalPath, { force: true });
  }

  private send(line: string): void {
    if (this.closed) return;
    if (!this.watchdog) {
      this.watchdog = this.start();
      if (!this.watchdog) return;
      // A new watchdog (the first, or one started after the last died) learns every tracked group.
      let all = '';
      for (const g of this.groups.keys()) all += `+${g}\n`;
      this.watchdog.stdin.write(all);
      return;
    }
    this.watchdog.stdin.write(line);
  }

  private start(): ProcessGuard['watchdog'] {
    let journal = '';
    if (this.journalDir && this.journalPath) {
      try {
        mkdirSync(this.journalDir, { recursive: true, mode: 0o700 });
        journal = this.journalPath;
      } catch {
        // A read-only store: the watchdog still works, without a journal for the reaper.
      }
    }
    let child: ChildProcess;
    try {
      child = spawn('/bin/sh', ['-c', WATCHDOG_SCRIPT, WATCHDOG_NAME, String(process.pid), journal], {
        detached: true,
        stdio: ['pipe', 'ignore', 'ignore'],
        env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' },
      });
    } catch {
      return undefined;
    }
    const stdin = child.stdin as Writable & { unref?: () => void };
    const exited = new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    const w = { child, stdin, exited };
    const gone = () => {
      // Dead (or never started): the next registration starts a new one and tells it everything.
      if (this.watchdog === w) this.watchdog = undefined;
    };
    child.once('exit', gone);
    child.once('error', gone);
    stdin.on('error', gone);
    // Neither the watchdog nor its pipe keeps the host's event loop alive.
    child.unref();
    stdin.unref?.();
    return w;
  }
}
