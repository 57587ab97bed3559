/**
 * The watchdog process of an engine (process-guard.ts): a `/bin/sh` loop
 * tracking process groups from its stdin and SIGKILLing those still tracked
 * at end of file. Starting it forks the engine, which costs in proportion to
 * its memory, so Engine.open starts it first and tells it the journal later
 * (a `j` line). Imports only Node: engine.ts loads it before anything else.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';

/** The name the watchdog runs under (its `$0`): what `ps` and tests see. */
export const WATCHDOG_NAME = 'sluice-watchdog';

/**
 * The watchdog: `$1` is the engine's pid (for `ps`), `$2` the journal path
 * (`-` for none, set later by a `j<path>` line; never empty, so `pgrep` sees
 * `sluice-watchdog <pid> ` with its space). Signals meant for the engine's
 * terminal or service are ignored: it must outlive the engine by the moment it takes to kill.
 */
export const WATCHDOG_SCRIPT = `trap '' HUP INT QUIT TERM PIPE
umask 077
j=$2
[ "$j" = - ] && j=
g=' '
while IFS= read -r l; do
  case $l in
    +[0-9]*) x=\${l#+}; case $g in *" $x "*) ;; *) g="$g$x " ;; esac ;;
    -[0-9]*) x=\${l#-}; case $g in *" $x "*) g="\${g%% "$x" *} \${g#* "$x" }" ;; esac ;;
    j/*) j=\${l#j}; continue ;;
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

/** A started watchdog. */
export interface Watchdog {
  /** The `/bin/sh` process (detached: a session of its own). */
  readonly child: ChildProcess;
  /** The pipe it reads: `+<pgid>`, `-<pgid>`, `j<journal path>` lines. */
  readonly stdin: Writable;
  /** Settles when it has exited (or could not start). */
  readonly exited: Promise<void>;
  /** True once it has exited, failed to start, or its pipe broke. */
  readonly dead: boolean;
  /** Called once when it becomes {@link dead} (set by its owner). */
  onGone: (() => void) | undefined;
}

/** Starts a watchdog appending to `journal` (empty: none until a `j` line); undefined when the spawn throws. It keeps no event loop alive. */
export function startWatchdog(journal: string): Watchdog | undefined {
  let child: ChildProcess;
  try {
    child = spawn('/bin/sh', ['-c', WATCHDOG_SCRIPT, WATCHDOG_NAME, String(process.pid), journal || '-'], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
      env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' },
    });
  } catch {
    return undefined;
  }
  const stdin = child.stdin as Writable & { unref?: () => void };
  let dead = false;
  const w: Watchdog = {
    child,
    stdin,
    exited: new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    }),
    get dead() {
      return dead;
    },
    onGone: undefined,
  };
  // Listened to from the start: a pipe error with no listener would crash the host.
  const gone = () => {
    if (dead) return;
    dead = true;
    w.onGone?.();
  };
  child.once('exit', gone);
  child.once('error', gone);
  stdin.on('error', gone);
  child.unref();
  stdin.unref?.();
  return w;
}
