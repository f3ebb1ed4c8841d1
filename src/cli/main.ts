import { Command, CommanderError, Option } from 'commander';
import { packageVersion } from '../daemon/version.js';
import { registerAttach } from './commands/attach.js';
import { registerCheckpoint } from './commands/checkpoint.js';
import { registerClear } from './commands/clear.js';
import { registerDaemon } from './commands/daemon.js';
import { registerDialStdio } from './commands/dial-stdio.js';
import { registerEvents } from './commands/events.js';
import { registerExec } from './commands/exec.js';
import { registerKill } from './commands/kill.js';
import { registerLog } from './commands/log.js';
import { registerPaste } from './commands/paste.js';
import { registerPoll } from './commands/poll.js';
import { registerPs } from './commands/ps.js';
import { registerResume } from './commands/resume.js';
import { registerRm } from './commands/rm.js';
import { registerSendKeys } from './commands/send-keys.js';
import { registerSignal } from './commands/signal.js';
import { registerStatus } from './commands/status.js';
import { registerSubmit } from './commands/submit.js';
import { registerTool } from './commands/tool.js';
import { registerTools } from './commands/tools.js';
import { registerWrite } from './commands/write.js';
import { EXIT } from './context.js';
import { hostOption } from '../remote/option.js';

/** The `procctl` program: global options, one subcommand per file under commands/. */
export function buildProgram(): Command {
  const program = new Command('procctl')
    .description('Run and manage shell commands through the procctld daemon.')
    .version(packageVersion(), '-V, --version')
    .addOption(new Option('--socket <path>', 'the daemon socket (default: $PROCCTL_SOCKET, then $XDG_RUNTIME_DIR/procctl/procctl.sock, then <tmpdir>/procctl-<uid>/procctl.sock)'))
    .addOption(hostOption())
    .addOption(new Option('--scope <name>', 'the scope to act in (default "default")').env('PROCCTL_SCOPE'))
    .addOption(new Option('--token <token>', "the scope's token, where the daemon requires one").env('PROCCTL_TOKEN'))
    .option('--json', 'print the raw result as JSON')
    .showSuggestionAfterError()
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, 'procctl: ')) })
    .addHelpText(
      'after',
      '\nExit status: 0 success; 1 a failed command or session, or an error from the daemon; 2 a usage error;\n' +
        '3 the daemon cannot be reached.',
    );
  const commands = [
    registerExec,
    registerPs,
    registerPoll,
    registerLog,
    registerWrite,
    registerSendKeys,
    registerPaste,
    registerSubmit,
    registerResume,
    registerAttach,
    registerSignal,
    registerKill,
    registerClear,
    registerRm,
    registerEvents,
    registerCheckpoint,
    registerTool,
    registerTools,
    registerStatus,
    registerDaemon,
    registerDialStdio,
  ];
  for (const register of commands) {
    register(program);
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
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // Help and --version end through the same path, with status 0.
    process.exitCode = err.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
}
