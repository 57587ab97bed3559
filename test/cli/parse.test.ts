/**
 * The shared command-line conventions (cli/parse.ts) and the
 * did-you-mean of engine/suggest.ts, on their own.
 */
import { describe, expect, it } from 'vitest';
import { type CommandOptions, parseOptions } from '../../cli/parse.js';
import { closest, didYouMean, editDistance } from '../../engine/suggest.js';

const OPTIONS = {
  session: { type: 'string' },
  offset: { type: 'string' },
  plugin: { type: 'string', multiple: true },
  json: { type: 'boolean', short: 'j' },
  store: { type: 'string', short: 's' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies CommandOptions;

function failure(argv: string[]): { code: string; message: string; details: unknown } {
  try {
    parseOptions(argv, OPTIONS, 'demo');
  } catch (err) {
    return err as { code: string; message: string; details: unknown };
  }
  throw new Error(`parsed: ${JSON.stringify(argv)}`);
}

describe('command-line parsing', () => {
  it('takes --name value, --name=value, short options, repeatable options and positionals', () => {
    expect(
      parseOptions(
        ['run', '--session', 'a', '--offset=3', '-j', '-s', 'dir', '--plugin', 'x', '--plugin=y', 'z'],
        OPTIONS,
        'demo',
      ),
    ).toEqual({
      values: { session: 'a', offset: '3', json: true, store: 'dir', plugin: ['x', 'y'] },
      positionals: ['run', 'z'],
    });
    expect(parseOptions(['-sdir'], OPTIONS, 'demo').values).toEqual({ store: 'dir' });
  });

  it('a value that starts with "-" is the value (so --offset -1 reaches the option\'s own check)', () => {
    expect(parseOptions(['--offset', '-1'], OPTIONS, 'demo').values).toEqual({ offset: '-1' });
    expect(parseOptions(['--session', '-x'], OPTIONS, 'demo').values).toEqual({ session: '-x' });
    expect(parseOptions(['--session', '--other'], OPTIONS, 'demo').values).toEqual({ session: '--other' });
  });

  it('-- ends the options and - alone is a positional', () => {
    expect(parseOptions(['-', '--', '--json', '-x'], OPTIONS, 'demo')).toEqual({
      values: {},
      positionals: ['-', '--json', '-x'],
    });
  });

  it('an unknown option is EBADOPTION with the closest known one', () => {
    expect(failure(['--sesion', 'x'])).toMatchObject({
      code: 'EBADOPTION',
      message: 'unknown option --sesion; did you mean --session? (see sluice demo --help)',
      details: { option: '--sesion', suggestion: '--session' },
    });
    expect(failure(['--sessoin']).message).toContain('did you mean --session?');
    expect(failure(['--ses']).message).toContain('did you mean --session?');
    expect(failure(['--jsno']).message).toContain('did you mean --json?');
    expect(failure(['--completely-else'])).toMatchObject({
      message: 'unknown option --completely-else (see sluice demo --help)',
      details: { option: '--completely-else' },
    });
    expect(failure(['-x']).message).toBe('unknown option -x (see sluice demo --help)');
  });

  it('a single-value option given twice is refused, quoting both values', () => {
    expect(failure(['--session', 'a', '--session=b'])).toMatchObject({
      code: 'EBADOPTION',
      message: '--session was given twice ("a" and "b"); it takes one value (see sluice demo --help)',
    });
    expect(failure(['-s', 'a', '--store', 'b']).message).toContain('--store was given twice');
  });

  it('a missing value and a value given to a boolean are refused', () => {
    expect(failure(['--session'])).toMatchObject({
      code: 'EBADOPTION',
      message: '--session needs a value (see sluice demo --help)',
    });
    // One of the command's own options next: the value was forgotten, not meant to be "--json".
    expect(failure(['--session', '--json', 'x'])).toMatchObject({
      code: 'EBADOPTION',
      message: '--session needs a value ("--json" came next) (see sluice demo --help)',
    });
    expect(failure(['--offset', '--store=d']).message).toContain('--offset needs a value ("--store=d" came next)');
    expect(failure(['--offset', '--']).message).toContain('--offset needs a value ("--" came next)');
    expect(failure(['--json=false'])).toMatchObject({
      code: 'EBADOPTION',
      message: '--json takes no value (got "--json=false") (see sluice demo --help)',
    });
    expect(failure(['-s']).message).toBe('-s needs a value (see sluice demo --help)');
  });

  it('an inherited property name is not an option', () => {
    expect(failure(['--constructor']).code).toBe('EBADOPTION');
    expect(failure(['--toString']).code).toBe('EBADOPTION');
  });
});

describe('did you mean', () => {
  it('counts insertions, deletions, substitutions and swapped neighbours as one edit each', () => {
    expect(editDistance('session', 'session')).toBe(0);
    expect(editDistance('sesion', 'session')).toBe(1);
    expect(editDistance('sessoin', 'session')).toBe(1);
    expect(editDistance('bsh', 'bash')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
  });

  it('suggests a close name or a unique prefix, and nothing for another word', () => {
    expect(closest('rnu', ['run', 'read', 'replay'])).toBe('run');
    expect(closest('repl', ['run', 'read', 'replay'])).toBe('replay');
    expect(closest('re', ['run', 'read', 'replay'])).toBeUndefined();
    expect(closest('deploy', ['run', 'read', 'replay'])).toBeUndefined();
    expect(didYouMean('bsh', ['bash', 'read'], true)).toBe('; did you mean "bash"?');
    expect(didYouMean('zzz', ['bash', 'read'])).toBe('');
  });
});
