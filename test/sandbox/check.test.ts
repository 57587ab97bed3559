/**
 * `sluice sandbox check`: the report of what this machine supports, as the
 * engine user and (from root) as nobody, whose cgroups are not writable.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { renderSandboxSupport } from '../../cli/sandbox.js';
import { onPath } from '../../workers/sandbox/bwrap.js';
import { type SandboxSupport, sandboxSupport } from '../../workers/sandbox/support.js';
import { cleanupDirs, MAIN, ROOT, sluice, tempDir } from '../cli/helpers.js';
import { runsIf } from './skipped.js';

afterEach(cleanupDirs);

const runuser = process.getuid?.() === 0 ? onPath('runuser') : undefined;

describe('sluice sandbox check', () => {
  it('prints the report as JSON and exits 0 exactly when a sandbox can be had', async () => {
    const r = await sluice(['sandbox', 'check', '--json'], await tempDir());
    const report = JSON.parse(r.stdout);
    expect(Object.keys(report).sort()).toEqual(
      ['available', 'bwrap', 'cgroup', 'limits', 'prlimit', 'processesLimit', 'uid'].sort(),
    );
    expect(Object.keys(report.bwrap).sort()).toEqual(['error', 'path', 'version', 'works']);
    expect(Object.keys(report.cgroup).sort()).toEqual(['kind', 'memory', 'pids', 'reasons']);
    expect(Object.keys(report.limits)).toEqual(['memory', 'cpu', 'processes', 'fileSize', 'openFiles']);
    expect(report.uid).toBe(process.getuid?.());
    expect(report.available).toBe(report.bwrap.works);
    expect(r.code).toBe(report.available ? 0 : 1);
    // The command's report is the library's.
    expect(report).toEqual(JSON.parse(JSON.stringify(sandboxSupport())));
    if (report.bwrap.path) expect(report.bwrap.version).toMatch(/^bubblewrap \d/);
    // Only the cgroup's limits are attributed for memory and processes; openFiles never is.
    expect(report.limits.memory).toBe(
      report.cgroup.memory ? 'attributed' : report.prlimit ? 'enforced' : 'unavailable',
    );
    expect(report.limits.openFiles).not.toBe('attributed');
    expect(report.processesLimit).toBe(report.cgroup.pids || (report.prlimit !== null && report.uid !== 0));
  });

  it('prints the text report the library renders', async () => {
    const r = await sluice(['sandbox', 'check'], await tempDir());
    expect(r.stdout).toBe(renderSandboxSupport(sandboxSupport()));
    expect(r.stdout).toMatch(/^sandbox: (available|unavailable)\n/);
  });

  it('reports no sandbox without bwrap on PATH (exit 1)', async () => {
    const r = await sluice(['sandbox', 'check', '--json'], await tempDir(), { PATH: '/nonexistent' });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({
      available: false,
      bwrap: { path: null, works: false, error: 'no bwrap on PATH' },
      prlimit: null,
      limits: { cpu: 'unavailable', fileSize: 'unavailable', openFiles: 'unavailable' },
    });
  });

  it.runIf(runsIf(runuser !== undefined, 'sandbox check as nobody', 'it needs root and runuser to become nobody'))(
    'as nobody: no writable cgroup, memory and processes only enforced',
    () => {
      const r = spawnSync(
        runuser as string,
        ['-u', 'nobody', '--', process.execPath, MAIN, 'sandbox', 'check', '--json'],
        {
          encoding: 'utf8',
          cwd: '/',
        },
      );
      const report = JSON.parse(r.stdout);
      expect(report).toMatchObject({ uid: 65534, cgroup: { memory: false, pids: false } });
      if (report.prlimit) expect(report.limits).toMatchObject({ memory: 'enforced', processes: 'enforced' });
      expect(r.status).toBe(report.available ? 0 : 1);
    },
  );

  it('wants the action: none or another is a usage error (exit 2)', async () => {
    const dir = await tempDir();
    const none = await sluice(['sandbox'], dir);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^EBADARGS: /);
    const typo = await sluice(['sandbox', 'chek'], dir);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('check');
  });
});

describe('docs/cli.md', () => {
  it('shows the text report the command renders for its example machine', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8').split('\n');
    const start = doc.indexOf('$ sluice sandbox check');
    const end = doc.findIndex((l, i) => i > start && l.startsWith('```'));
    const example: SandboxSupport = {
      available: true,
      uid: 0,
      bwrap: { path: '/usr/bin/bwrap', version: 'bubblewrap 0.8.0', works: true, error: null },
      prlimit: '/usr/bin/prlimit',
      cgroup: { kind: 'v1', memory: true, pids: true, reasons: [] },
      processesLimit: true,
      limits: {
        memory: 'attributed',
        cpu: 'attributed',
        processes: 'attributed',
        fileSize: 'attributed',
        openFiles: 'enforced',
      },
    };
    expect(`${doc.slice(start + 1, end).join('\n')}\n`).toBe(renderSandboxSupport(example));
  });
});
