/**
 * Shell completion: the bash script is sourced into a real bash and its
 * completion function called as bash calls it (COMP_WORDS, COMP_CWORD);
 * tool names and session ids are asked of the real `sluice`. The zsh script
 * is checked by zsh itself where zsh is installed (.ci/run installs it).
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupDirs, MAIN, sluice, tempDir } from './helpers.js';

const run = promisify(execFile);

// One directory for the file's tests (the scripts and a store), removed at the end.
afterAll(cleanupDirs);

let dir: string;
let bashScript: string;
let zshScript: string;

beforeAll(async () => {
  dir = await tempDir();
  bashScript = join(dir, 'sluice.bash');
  zshScript = join(dir, '_sluice');
  const bash = await sluice(['completion', 'bash'], dir);
  const zsh = await sluice(['completion', 'zsh'], dir);
  expect(bash.code, bash.stderr).toBe(0);
  expect(zsh.code, zsh.stderr).toBe(0);
  await fsp.writeFile(bashScript, bash.stdout);
  await fsp.writeFile(zshScript, zsh.stdout);
});

/** What `_sluice` offers for the words (the last one being completed), in a real bash. */
async function complete(words: string[], cwd = dir): Promise<string[]> {
  // words[0] is the sluice being completed: the built CLI, runnable through its shebang.
  const all = [MAIN, ...words];
  const script = [
    `source ${JSON.stringify(bashScript)}`,
    `COMP_WORDS=(${all.map((w) => `'${w.replaceAll("'", "'\\''")}'`).join(' ')})`,
    `COMP_CWORD=${all.length - 1}`,
    '_sluice',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash, not a template.
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join('\n');
  const { stdout } = await run('bash', ['--norc', '--noprofile', '-c', script], {
    cwd,
    env: { ...process.env, SLUICE_STORE: join(cwd, 'store') },
  });
  return stdout.split('\n').filter((l) => l !== '');
}

describe('bash completion', () => {
  it('registers _sluice for the sluice command', async () => {
    const { stdout } = await run('bash', ['--norc', '-c', `source ${bashScript}; complete -p sluice`]);
    expect(stdout.trim()).toBe('complete -o default -F _sluice sluice');
  });

  it('completes subcommands, including the new ones', async () => {
    expect(await complete(['r'])).toEqual(['run', 'read', 'replay', 'revert']);
    expect(await complete(['se'])).toEqual(['serve', 'sessions']);
    expect(await complete([''])).toEqual(expect.arrayContaining(['tools', 'sessions', 'completion', 'gc', 'help']));
  });

  it("completes a command's options, and nothing of another command", async () => {
    expect(await complete(['run', '--ses'])).toEqual(['--session']);
    expect(await complete(['run', '--max-'])).toEqual(['--max-lines', '--max-bytes']);
    expect(await complete(['read', '--byte'])).toEqual(['--byte-offset']);
    expect(await complete(['gc', '--ses'])).toEqual([]);
  });

  it('completes tool names and session ids by asking sluice, and shells for completion', async () => {
    expect(await complete(['run', ''])).toEqual(['bash', 'read', 'grep']);
    expect(await complete(['run', 'b'])).toEqual(['bash']);
    // After the tool, no more positionals: nothing offered.
    expect(await complete(['run', 'bash', ''])).toEqual([]);
    const r = await sluice(['run', 'bash', '--args', '{"command":"true"}', '--session', 'demo-1'], dir);
    expect(r.code, r.stderr).toBe(0);
    expect(await complete(['replay', ''])).toEqual(['demo-1']);
    expect(await complete(['run', 'bash', '--session', 'de'])).toEqual(['demo-1']);
    expect(await complete(['revert', '--json', ''])).toEqual(['demo-1']);
    expect(await complete(['completion', ''])).toEqual(['bash', 'zsh']);
  });

  it('completes directories for --store and files for --config', async () => {
    await fsp.mkdir(join(dir, 'stores-a'));
    await fsp.writeFile(join(dir, 'config-x.json'), '{}');
    expect(await complete(['sessions', '--store', 'stores-'])).toEqual(['stores-a']);
    expect(await complete(['run', '--config', 'config-'])).toEqual(['config-x.json']);
  });

  it("passes the line's --store on when it asks for sessions", async () => {
    const other = join(dir, 'other-store');
    const r = await sluice(
      ['run', 'bash', '--args', '{"command":"true"}', '--session', 'elsewhere', '--store', other],
      dir,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(await complete(['replay', '--store', other, ''])).toEqual(['elsewhere']);
  });
});

const zsh = await run('zsh', ['--version']).then(
  () => true,
  () => false,
);

describe.runIf(zsh)('zsh completion', () => {
  it('parses, defines _sluice and registers it with compdef', async () => {
    await run('zsh', ['-n', zshScript]);
    const { stdout } = await run('zsh', [
      '-f',
      '-c',
      `autoload -U compinit && compinit -u -D && source ${zshScript} && print -r -- $+functions[_sluice] $_comps[sluice]`,
    ]);
    expect(stdout.trim()).toBe('1 _sluice');
  });

  it('dispatches per command and asks the real sluice for tools and sessions (zsh builtins stubbed to print)', async () => {
    const r = await sluice(['run', 'bash', '--args', '{"command":"true"}', '--session', 'zsh-session'], dir);
    expect(r.code, r.stderr).toBe(0);
    // _arguments and _describe print what they are given: the spec lines and the candidates.
    const script = (words: string[], call = '_sluice') =>
      [
        'compdef() { : }',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: zsh, not a template.
        '_describe() { print -l -- ${(P)2} }',
        '_arguments() { print -l -- "$@" }',
        `source ${zshScript}`,
        `words=(${[MAIN, ...words].map((w) => `'${w}'`).join(' ')})`,
        `CURRENT=${words.length + 1}`,
        `_sluice_prog=${MAIN}`,
        call,
      ].join('\n');
    const out = async (words: string[], call?: string) =>
      (
        await run('zsh', ['-f', '-c', script(words, call)], {
          cwd: dir,
          env: { ...process.env, SLUICE_STORE: join(dir, 'store') },
        })
      ).stdout
        .split('\n')
        .filter((l) => l !== '');
    expect(await out([''])).toEqual(
      expect.arrayContaining([
        'tools:list the tools a call can name, with descriptions and arguments (--json  their schemas)',
      ]),
    );
    const runSpecs = await out(['run', '']);
    expect(runSpecs).toEqual(
      expect.arrayContaining([
        '--session[session]:session:_sluice_sessions',
        '*--plugin[plugin]:plugin:_files',
        '1:tool:_sluice_tools',
      ]),
    );
    expect(await out(['run', ''], '_sluice_tools')).toEqual(['bash', 'read', 'grep']);
    expect(await out(['replay', ''], '_sluice_sessions')).toEqual(expect.arrayContaining(['zsh-session']));
  });
});

describe('sluice completion', () => {
  it('refuses an unknown shell, suggesting the closest', async () => {
    const r = await sluice(['completion', 'bsh'], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('EBADARGS: sluice completion takes one shell, bash or zsh, got "bsh"; did you mean bash?\n');
  });
});
