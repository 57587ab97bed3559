/**
 * `sluice sandbox check [--json]`: what this machine supports of the tool
 * sandbox (bubblewrap, user namespaces, prlimit, cgroups) and how each
 * resource limit holds. Exit 0 when a sandbox can be had, 1 otherwise.
 */
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { SANDBOX_LIMIT_NAMES, type SandboxLimitName } from '../engine/protocol/sandbox.js';
import { didYouMean } from '../engine/suggest.js';
import { type LimitSupport, type SandboxSupport, sandboxSupport } from '../workers/sandbox/support.js';
import { type Command, EXIT_FAILURE, EXIT_OK, HELP_OPTION, parseCommandLine, writeOut } from './common.js';

const USAGE = `Usage: sluice sandbox check [--json]

Reports what this machine supports of the tool sandbox: bubblewrap (bwrap)
and whether it can build its namespaces here, prlimit, the cgroup version
and its memory and pids controllers, and for each resource limit whether a
call past it ends with ELIMIT (attributed), only fails inside the program
(enforced), or cannot be set (unavailable). Exits 0 when a sandbox can be
had, 1 otherwise.

  --json, -j     print { available, uid, bwrap: { path, version, works, error }, prlimit,
                 cgroup: { kind, memory, pids, reasons }, processesLimit, limits }
`;

const OPTIONS = { json: { type: 'boolean', short: 'j' }, ...HELP_OPTION } as const;
const ACTIONS = ['check'] as const;

/** How a limit holds, in words, by the way it holds here. */
const HOW: Record<SandboxLimitName, Partial<Record<LimitSupport, string>>> = {
  memory: {
    attributed: 'cgroup memory limit; an OOM kill ends the call with ELIMIT',
    enforced: 'RLIMIT_AS; allocations fail with ENOMEM inside the program',
  },
  cpu: { attributed: 'RLIMIT_CPU; SIGXCPU ends the call with ELIMIT' },
  processes: {
    attributed: 'cgroup pids limit; a fork past it fails and the call ends with ELIMIT',
    enforced: 'RLIMIT_NPROC; fork fails with EAGAIN inside the program',
  },
  fileSize: { attributed: 'RLIMIT_FSIZE; SIGXFSZ ends the call with ELIMIT' },
  openFiles: { enforced: 'RLIMIT_NOFILE; open fails with EMFILE inside the program' },
};

/** The text report of `s`. */
export function renderSandboxSupport(s: SandboxSupport): string {
  const bwrap = s.bwrap.path
    ? `${s.bwrap.version ?? 'bwrap'} at ${s.bwrap.path}, ${s.bwrap.works ? 'builds a sandbox' : `cannot build a sandbox: ${s.bwrap.error}`}`
    : 'no bwrap on PATH';
  const cgroup =
    s.cgroup.kind === 'none'
      ? 'none'
      : `${s.cgroup.kind} (memory: ${s.cgroup.memory ? 'yes' : 'no'}, pids: ${s.cgroup.pids ? 'yes' : 'no'})`;
  const width = Math.max(...SANDBOX_LIMIT_NAMES.map((n) => n.length));
  const lines = [
    `sandbox: ${s.available ? 'available' : 'unavailable'}`,
    `bwrap:   ${bwrap}`,
    `prlimit: ${s.prlimit ?? 'not on PATH'}`,
    `cgroup:  ${cgroup}`,
    ...s.cgroup.reasons.map((r) => `         ${r}`),
    `uid:     ${s.uid}${s.uid === 0 ? ' (root: a processes limit needs a pids cgroup)' : ''}`,
    'limits:',
    ...SANDBOX_LIMIT_NAMES.map((n) => {
      const how = HOW[n][s.limits[n]];
      return `  ${n.padEnd(width)}  ${s.limits[n]}${how ? `: ${how}` : ''}`;
    }),
  ];
  return `${lines.join('\n')}\n`;
}

/** The `sandbox` command. */
export const command: Command = {
  summary: 'check what this machine supports of the tool sandbox (bwrap, cgroups, limits)',
  usage: USAGE,
  options: OPTIONS,
  positionals: [{ name: 'check', complete: ACTIONS }],
  async run(argv, ctx) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS, 'sandbox');
    if (values.help) {
      await writeOut(ctx.stdout, USAGE);
      return EXIT_OK;
    }
    const action = positionals[0];
    if (positionals.length !== 1 || action !== 'check') {
      const hint = action === undefined ? '' : didYouMean(action, ACTIONS);
      throw new BadArgumentsError(
        `sluice sandbox takes one action, check, got ${positionals.length === 0 ? 'none' : JSON.stringify(positionals.join(' '))}${hint}`,
      );
    }
    const report = sandboxSupport({ env: ctx.env });
    await writeOut(ctx.stdout, values.json ? `${JSON.stringify(report)}\n` : renderSandboxSupport(report));
    return report.available ? EXIT_OK : EXIT_FAILURE;
  },
};
