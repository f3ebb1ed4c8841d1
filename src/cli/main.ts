import { Command, CommanderError, Option } from 'commander';
import { packageVersion } from '../base/version.js';
import { hostOption } from '../remote/option.js';
import { COMMANDS } from './commands/index.js';
import { EXIT } from './context.js';

/** The `procctl` program with its global options and no commands yet. */
function programWithGlobals(): Command {
  return new Command('procctl')
    .description('Run and manage shell commands through the procctld daemon.')
    .addOption(new Option('--socket <path>', 'the daemon socket (default: $PROCCTL_SOCKET, then $XDG_RUNTIME_DIR/procctl/procctl.sock, then <tmpdir>/procctl-<uid>/procctl.sock)'))
    .addOption(hostOption())
    .addOption(new Option('--scope <name>', 'the scope to act in (default "default"; "*" is every scope, the operator\'s: the adminToken, else the approver credential)').env('PROCCTL_SCOPE'))
    .addOption(new Option('--token <token>', "the scope's token, where the daemon requires one").env('PROCCTL_TOKEN'))
    .option('--json', 'print the raw result as JSON')
    .showSuggestionAfterError()
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, 'procctl: ')) })
    .addHelpText(
      'after',
      '\nExit status: 0 success; 1 a failed command or session, or an error from the daemon; 2 a usage error;\n' +
        "3 the daemon cannot be reached. exec (and resume --yes) exits with the command's own status.",
    );
}

/**
 * The command `argv` runs: its first word that is neither a global option nor an option's value
 * (`procctl --socket S ps` → `ps`); for `procctl help ps`, `ps`. undefined when there is none.
 */
export function commandWord(program: Command, argv: readonly string[]): string | undefined {
  const withValue = new Set(program.options.filter((o) => o.required || o.optional).flatMap((o) => [o.long, o.short]));
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i];
    if (word === '--') return undefined;
    if (!word.startsWith('-') || word === '-') return word === 'help' ? argv[i + 1] : word;
    if (withValue.has(word)) i++;
  }
  return undefined;
}

/**
 * The `procctl` program, one subcommand per file under commands/. Only the command `argv` runs is
 * loaded, alone; without one (help, a typo), every command is there by name and summary, for the
 * list and for suggestions. Without `argv`, every command is loaded.
 */
export async function buildProgram(argv?: readonly string[]): Promise<Command> {
  const program = programWithGlobals();
  const wanted = argv === undefined ? undefined : COMMANDS.find((c) => c.name === commandWord(program, argv));
  // package.json is read for --version and help only.
  if (!wanted || argv!.includes('-V') || argv!.includes('--version')) program.version(packageVersion(), '-V, --version');
  if (wanted) {
    (await wanted.load())(program);
    return program;
  }
  for (const entry of COMMANDS) {
    if (argv === undefined) (await entry.load())(program);
    else program.command(entry.name).summary(entry.summary);
  }
  return program;
}

/** Run the CLI with the arguments after the program name; sets the exit status. */
export async function runCli(argv: string[]): Promise<void> {
  // A reader that went away (`procctl log -f ID | head`) is not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
  const program = await buildProgram(argv);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // Help and --version end through the same path, with status 0.
    process.exitCode = err.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
}
