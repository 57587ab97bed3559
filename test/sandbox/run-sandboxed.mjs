/**
 * An engine in miniature for the limit tests: runs one command under a
 * sandbox policy with prepareSandboxed (the built dist/ code) as whichever
 * user starts it, and prints one JSON line: how the process exited, the
 * verdict and its ELIMIT message, the cgroups it ran in and which of them
 * are still there after release().
 *
 * Argument: JSON `{ policy, file, args, cwd, releaseAfterMs? }`; with
 * `releaseAfterMs`, release() runs while the process is still running.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { prepareSandboxed } from '../../dist/workers/sandbox/prepare.js';
import { limitExceededMessage } from '../../dist/workers/sandbox/verdict.js';

const TAIL = 4096;
const { policy, file, args, cwd, releaseAfterMs } = JSON.parse(process.argv[2]);
const prepared = prepareSandboxed(policy, file, args, cwd);
const child = spawn(prepared.file, prepared.args, { stdio: ['ignore', 'pipe', 'pipe'] });
const closed = new Promise((resolve) => child.on('close', (c, s) => resolve([c, s])));
let stdout = '';
let stderr = '';
// Only the tails: a failing program may print without end.
child.stdout.setEncoding('utf8').on('data', (d) => {
  stdout = (stdout + d).slice(-TAIL);
});
child.stderr.setEncoding('utf8').on('data', (d) => {
  stderr = (stderr + d).slice(-TAIL);
});
const existedWhileRunning = await new Promise((resolve) => {
  child.once('spawn', () => resolve(prepared.cgroups.map((d) => existsSync(d))));
});
if (releaseAfterMs !== undefined) setTimeout(() => void prepared.release(), releaseAfterMs);
const [code, signal] = await closed;
const verdict = prepared.verdict({ code, signal });
await prepared.release();
process.stdout.write(
  `${JSON.stringify({
    code,
    signal,
    verdict: verdict ?? null,
    message: verdict ? limitExceededMessage(verdict) : null,
    cgroups: prepared.cgroups,
    existedWhileRunning,
    leftAfterRelease: prepared.cgroups.filter((d) => existsSync(d)),
    stdout,
    stderr,
  })}\n`,
);
