import type { Command } from 'commander';
import { act, globalsOf } from '../context.js';

export function registerDaemon(program: Command): void {
  program
    .command('daemon')
    .summary('run procctld in the foreground (same options as procctld), or install it as a systemd service')
    .description(
      'Run the daemon in the foreground, exactly as `procctld [--socket PATH] [--config FILE] [--log-level LEVEL]`.\n' +
        '`procctl daemon install [--user | --system] [--ui [--ui-port N]] [--dry-run]` writes the systemd units of this install ' +
        "(ExecStart runs this package's procctld with this node), reloads systemd and enables the socket; where systemd " +
        'is not running, or with --dry-run, it writes nothing and prints a shell script that would (docs/systemd.md). ' +
        `--ui adds the console's unit, procctl-ui.service, serving on 127.0.0.1:--ui-port (default 7787; docs/console.md). ` +
        'Without --user or --system: --system for root, else --user.',
    )
    .argument('[args...]', 'procctld options')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async (args: string[], _o: unknown, cmd: Command) => {
      const g = globalsOf(cmd);
      if (args[0] === 'install') {
        const { daemonInstall } = await import('./daemon-install.js');
        return act(async () => daemonInstall(args.slice(1)))();
      }
      if (g.host !== undefined) {
        process.stderr.write('procctl: daemon runs procctld on this host; --host does not apply (on the other host, run it there, e.g. as a service: docs/systemd.md)\n');
        process.exitCode = 2;
        return;
      }
      // Loaded only here, so the client commands start without the daemon's dependencies.
      const { runDaemon } = await import('../../daemon/main.js');
      // The global --socket was taken by procctl's own parser; hand it on.
      await runDaemon([...(g.socket !== undefined ? ['--socket', g.socket] : []), ...args]);
    });
}
