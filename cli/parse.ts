/**
 * The command-line conventions every `sluice` command shares, from the
 * options it declares (docs/cli.md): a value option takes the next word even
 * when it starts with `-` (so `--offset -1` reaches the option's own check);
 * an unknown option is EBADOPTION with the closest known one; a value
 * option given twice is refused unless `multiple`; `--` ends the options.
 * Hand-written because the same declarations drive the completion scripts
 * (docs/architecture.md, "Dependencies").
 */
import type { ParseArgsConfig } from 'node:util';
import { BadOptionError } from '../engine/protocol/errors.js';
import { closest } from '../engine/suggest.js';

/** What shell completion offers for an option's value or a positional. */
export type Completion = 'file' | 'directory' | 'tool' | 'session' | 'none' | readonly string[];

/** One option: parseArgs' shape, plus how to complete its value. */
export type CommandOption = NonNullable<ParseArgsConfig['options']>[string] & {
  /** Completion of the value (string options). @default 'none' */
  complete?: Completion;
};

/** Option declarations of a command, by long name. */
export type CommandOptions = Record<string, CommandOption>;

/** The options and positionals of one command line. */
export interface ParsedOptions {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

function usageHint(command: string): string {
  return `(see sluice ${command} --help)`;
}

function unknownOption(flag: string, options: CommandOptions, command: string): BadOptionError {
  const names = Object.keys(options).map((n) => `--${n}`);
  const suggestion = flag.startsWith('--') ? closest(flag, names) : undefined;
  const hint = suggestion ? `; did you mean ${suggestion}?` : '';
  return new BadOptionError(`unknown option ${flag}${hint} ${usageHint(command)}`, {
    option: flag,
    ...(suggestion ? { suggestion } : {}),
  });
}

/** True when `word` is `--` or names one of `options` (`--name` or `--name=value`). */
function isOwnLongOption(word: string, options: CommandOptions): boolean {
  if (word === '--') return true;
  if (!word.startsWith('--')) return false;
  const eq = word.indexOf('=');
  return Object.hasOwn(options, word.slice(2, eq === -1 ? undefined : eq));
}

/**
 * Parses `argv` against `options`; throws {@link BadOptionError} (EBADOPTION,
 * exit 2) for an unknown option, a missing value, a value given to a
 * boolean, or a single-value option repeated.
 */
export function parseOptions(argv: readonly string[], options: CommandOptions, command: string): ParsedOptions {
  const values: ParsedOptions['values'] = {};
  const positionals: string[] = [];
  const set = (name: string, spec: CommandOption, value: string | boolean, flag: string) => {
    if (spec.multiple) {
      const list = (values[name] as string[] | undefined) ?? [];
      list.push(value as string);
      values[name] = list;
      return;
    }
    if (values[name] !== undefined && spec.type === 'string') {
      throw new BadOptionError(
        `${flag} was given twice (${JSON.stringify(values[name])} and ${JSON.stringify(value)}); it takes one value ${usageHint(command)}`,
        { option: flag },
      );
    }
    values[name] = value;
  };
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] as string;
    if (word === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (word.startsWith('--')) {
      const eq = word.indexOf('=');
      const name = word.slice(2, eq === -1 ? undefined : eq);
      const inline = eq === -1 ? undefined : word.slice(eq + 1);
      const spec = Object.hasOwn(options, name) ? options[name] : undefined;
      if (!spec) throw unknownOption(`--${name}`, options, command);
      if (spec.type === 'boolean') {
        if (inline !== undefined) {
          throw new BadOptionError(`--${name} takes no value (got ${JSON.stringify(word)}) ${usageHint(command)}`, {
            option: `--${name}`,
          });
        }
        set(name, spec, true, `--${name}`);
        continue;
      }
      const next = argv[i + 1];
      if (inline === undefined && (next === undefined || isOwnLongOption(next, options))) {
        const got = next === undefined ? '' : ` (${JSON.stringify(next)} came next)`;
        throw new BadOptionError(`--${name} needs a value${got} ${usageHint(command)}`, { option: `--${name}` });
      }
      const value = inline ?? (argv[++i] as string);
      set(name, spec, value, `--${name}`);
      continue;
    }
    if (word.startsWith('-') && word.length > 1) {
      const letter = word[1] as string;
      const entry = Object.entries(options).find(([, o]) => o.short === letter);
      if (!entry) throw unknownOption(word, options, command);
      const [name, spec] = entry;
      if (spec.type === 'boolean') {
        if (word.length > 2) throw unknownOption(word, options, command);
        set(name, spec, true, `-${letter}`);
        continue;
      }
      const value = word.length > 2 ? word.slice(2) : argv[++i];
      if (value === undefined) {
        throw new BadOptionError(`-${letter} needs a value ${usageHint(command)}`, { option: `-${letter}` });
      }
      set(name, spec, value, `-${letter}`);
      continue;
    }
    positionals.push(word);
  }
  return { values, positionals };
}
