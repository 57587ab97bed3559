/**
 * Support of the lifecycle tests: an SDK host process running one long bash
 * call (test/fixtures/lifecycle/engine-host.mjs), its watchdog, and process
 * checks that treat a zombie as gone (an orphan reparented to an init that
 * does not reap stays a zombie, but runs nothing).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { pgrep, sleep } from './engines.js';

const HOST = fileURLToPath(new URL('../fixtures/lifecycle/engine-host.mjs', import.meta.url));

/** A running host: its process, the call it started, and how it ended. */
export interface Host {
  child: ChildProcess;
  pid: number;
  callId: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const hosts: Host[] = [];

/**
 * Starts a host on `store` running `command` in `session` (opted in to
 * `engine.handleSignals()` when `signals`), and resolves once the call is running.
 */
export async function startHost(store: string, session: string, command: string, signals = false): Promise<Host> {
  const child = spawn(process.execPath, [HOST, store, session, ...(signals ? ['signals'] : [])], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, HOST_COMMAND: command },
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (b: Buffer) => {
    out += b.toString();
  });
  child.stderr?.on('data', (b: Buffer) => {
    err += b.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  const callId = await new Promise<string>((resolve, reject) => {
    const check = () => {
      const m = /^running (\S+)$/m.exec(out);
      if (m) resolve(m[1] as string);
      else if (/^ended/m.test(out)) reject(new Error(`the host's call ended early: ${out}${err}`));
      else setTimeout(check, 10);
    };
    check();
    void exited.then(() => reject(new Error(`the host exited: ${out}${err}`)));
  });
  const host = { child, pid: child.pid as number, callId, stdout: () => out, stderr: () => err, exited };
  hosts.push(host);
  return host;
}

/** Kills hosts left over by a test (use in afterEach). */
export async function stopHosts(): Promise<void> {
  for (const h of hosts.splice(0)) {
    if (h.child.exitCode === null && h.child.signalCode === null) h.child.kill('SIGKILL');
    await h.exited;
  }
}

/** True when `pid` runs (exists and is not a zombie). */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Pids of the watchdog of engine process `enginePid` (at most one). */
export function watchdogOf(enginePid: number): Promise<number[]> {
  return pgrep(`sluice-watchdog ${enginePid} `);
}

/**
 * Waits until `check` holds, polling; the deadline only bounds a failing
 * test (what is asserted is the state, never how long it took).
 */
export async function eventually(check: () => boolean | Promise<boolean>, ms = 30_000): Promise<boolean> {
  const until = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > until) return false;
    await sleep(20);
  }
}
