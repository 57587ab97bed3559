/**
 * `sluice completion bash|zsh`: prints the shell completion script,
 * generated from every command's declared options (completion.ts).
 */
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { didYouMean } from '../engine/suggest.js';
import { type Command, EXIT_OK, HELP_OPTION, parseCommandLine, writeOut } from './common.js';
import { bashCompletion, type CompletionSpec, SHELLS, type Shell, zshCompletion } from './completion.js';

const USAGE = `Usage: sluice completion <shell>

Prints the completion script of <shell>, bash or zsh: subcommands, their
options, and values (directories for --store, files, tool names, session ids).

  bash    source <(sluice completion bash)   (in ~/.bashrc), or save it as
          /usr/share/bash-completion/completions/sluice
  zsh     source <(sluice completion zsh)    (in ~/.zshrc, after compinit), or save
          it as _sluice in a directory of $fpath
`;

const OPTIONS = { ...HELP_OPTION } as const;

/** The `completion` command, over the specs of every command (main.ts loads them). */
export function completionCommand(specs: () => Promise<CompletionSpec[]>): Command {
  return {
    summary: 'print the bash or zsh completion script',
    usage: USAGE,
    options: OPTIONS,
    positionals: [{ name: '<shell>', complete: SHELLS }],
    async run(argv, ctx) {
      const { values, positionals } = parseCommandLine(argv, OPTIONS, 'completion');
      if (values.help) {
        await writeOut(ctx.stdout, USAGE);
        return EXIT_OK;
      }
      const shell = positionals[0];
      if (positionals.length !== 1 || !(SHELLS as readonly string[]).includes(shell as string)) {
        const hint = shell === undefined ? '' : didYouMean(shell, SHELLS);
        throw new BadArgumentsError(
          `sluice completion takes one shell, bash or zsh, got ${positionals.length === 0 ? 'none' : JSON.stringify(positionals.join(' '))}${hint}`,
        );
      }
      const all = await specs();
      await writeOut(ctx.stdout, (shell as Shell) === 'bash' ? bashCompletion(all) : zshCompletion(all));
      return EXIT_OK;
    },
  };
}
