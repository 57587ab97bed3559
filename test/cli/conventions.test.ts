/**
 * What every command keeps true (cli/common.ts, `Command`): it
 * declares its options and positionals (so completion knows them), its
 * usage text names each option, and docs/cli.md documents the command and
 * each of its options.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Command } from '../../cli/common.js';
import { cleanupDirs, ROOT, sluice, tempDir } from './helpers.js';

let names: string[];
const commands = new Map<string, Command>();

beforeAll(async () => {
  const dir = await tempDir();
  const help = await sluice(['--help'], dir);
  await cleanupDirs();
  names = [...help.stdout.matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1] as string);
  for (const name of names) {
    if (name === 'completion') {
      const m = await import('../../cli/completion-command.js');
      commands.set(
        name,
        m.completionCommand(async () => []),
      );
    } else {
      const m = (await import(/* @vite-ignore */ join(ROOT, 'cli', `${name}.ts`))) as { command: Command };
      commands.set(name, m.command);
    }
  }
});

describe('every command', () => {
  it('is listed by sluice --help, the new ones included', () => {
    expect(names).toEqual(expect.arrayContaining(['run', 'read', 'tools', 'sessions', 'revert', 'completion']));
  });

  it('declares its options and positionals, and its usage names every option', () => {
    for (const [name, c] of commands) {
      expect(c.options, name).toBeDefined();
      expect(c.positionals, name).toBeDefined();
      for (const [option, spec] of Object.entries(c.options ?? {})) {
        if (option === 'help') continue;
        expect(c.usage, `${name} --${option}`).toContain(`--${option}`);
        if (spec.short) expect(c.usage, `${name} -${spec.short}`).toContain(`-${spec.short}`);
      }
      for (const p of c.positionals ?? []) expect(c.usage, `${name} ${p.name}`).toContain(p.name);
    }
  });

  it('has a section in docs/cli.md that names each of its options', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8');
    const sections = doc.split(/^## /m).slice(1);
    for (const [name, c] of commands) {
      const section = sections.find((s) => s.startsWith(`\`sluice ${name}`));
      expect(section, `docs/cli.md section for sluice ${name}`).toBeDefined();
      for (const option of Object.keys(c.options ?? {})) {
        if (option === 'help' || option === 'store') continue;
        expect(section, `docs/cli.md: sluice ${name} --${option}`).toContain(`--${option}`);
      }
    }
  });
});
