/**
 * Tool processes must not outlive their engine, even when it dies by
 * SIGKILL and runs no code of its own. Each engine has one small watchdog
 * process (watchdog.ts) in a session of its own, told over a pipe which
 * groups to track (`+<pgid>`) and untrack (`-<pgid>`); at end of file, which
 * the kernel makes happen however the engine died, it SIGKILLs what it still
 * tracks. It also journals each line in `procs/<engine pid>-<token>.pgids`,
 * each `+` line stamped with the boot-clock tick it was written, so that if
 * both die at once the orphan reaper (orphans.ts) kills what the journal
 * lists (docs/operations.md, "Tool processes and the end of their engine").
 */
import { mkdirSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { ownedName } from '../../store/owners.js';
import { isToolProcessGroup } from './process-group.js';
import { startWatchdog, type Watchdog } from './watchdog.js';

export { WATCHDOG_NAME, WATCHDOG_SCRIPT } from './watchdog.js';

/** How long {@link ProcessGuard.close} waits for the watchdog to exit before killing it. */
const CLOSE_WAIT_MS = 2000;

/** The process groups of one engine's calls, as its watchdog knows them. */
export class ProcessGuard {
  private readonly journalDir: string | undefined;
  private readonly journalPath: string | undefined;
  /** Registrations per group (two calls never share a live group; a tool may register one twice). */
  private readonly groups = new Map<number, number>();
  private watchdog: Watchdog | undefined;
  /** The running watchdog knows where its journal is (it was started with it, or told). */
  private journalTold = false;
  private closed = false;

  /**
   * `journalDir`: the store's `procs/` directory (omitted: no journal).
   * `watchdog`: one Engine.open started before the store's location was
   * known, used until it dies and told the journal before the first group.
   */
  constructor(journalDir?: string, watchdog?: Watchdog) {
    this.journalDir = journalDir;
    // Absolute: a watchdog takes a `j` line only for an absolute path.
    this.journalPath = journalDir && resolve(journalDir, `${ownedName()}.pgids`);
    if (watchdog && !watchdog.dead) this.adopt(watchdog, false);
  }

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

  /** Ends the watchdog (nothing is left to kill once every call has ended) and removes the journal. Idempotent. */
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
    // A watchdog started without a journal learns it before its first group. A path it cannot
    // read as one line is given to a new watchdog on its command line instead.
    if (this.watchdog && !this.journalTold) {
      const journal = this.journalFile();
      if (journal.includes('\n')) {
        this.watchdog.stdin.end();
        this.watchdog = undefined;
      } else {
        if (journal) this.watchdog.stdin.write(`j${journal}\n`);
        this.journalTold = true;
      }
    }
    if (!this.watchdog) {
      const w = startWatchdog(this.journalFile());
      if (!w || w.dead) return;
      this.adopt(w, true);
      // A new watchdog (the first, or one started after the last died) learns every tracked group.
      let all = '';
      for (const g of this.groups.keys()) all += `+${g}\n`;
      w.stdin.write(all);
      return;
    }
    this.watchdog.stdin.write(line);
  }

  /** Makes `w` this guard's watchdog until it dies (the next registration then starts another). */
  private adopt(w: Watchdog, journalTold: boolean): void {
    this.watchdog = w;
    this.journalTold = journalTold;
    w.onGone = () => {
      if (this.watchdog === w) this.watchdog = undefined;
    };
  }

  /** The journal's path once its directory exists; empty without one (none asked for, or a read-only store). */
  private journalFile(): string {
    if (!this.journalDir || !this.journalPath) return '';
    try {
      mkdirSync(this.journalDir, { recursive: true, mode: 0o700 });
      return this.journalPath;
    } catch {
      // A read-only store: the watchdog still works, without a journal for the reaper.
      return '';
    }
  }
}
