import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, scoped, withClient } from '../context.js';

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
        'Without --user or --system: --system for root, else --user.\n' +
        '`procctl daemon restart` hands every running session to a new daemon image in the same process (the procctld installed now, ' +
        'which may be a newer version) and waits until it serves: nothing running is stopped (SPEC §19, docs/durability.md). The ' +
        "operator's: it finds the operator's credential as --scope '*' does. Refused, with the old image serving on, when a session " +
        'cannot be carried or the new image reads another hand-over format.',
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
      if (args[0] === 'restart') return act(async () => restartDaemon(cmd))();
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

/** `procctl daemon restart`: ask for the hand-over, then wait for the new image to serve and say what it kept. */
async function restartDaemon(cmd: Command): Promise<number> {
  const g = globalsOf(cmd);
  const before = await withClient(g, (c) => c.call('daemon.status', {}));
  const asked = Date.now();
  const answer = await withClient(g, (c) => c.call('daemon.restart', scoped({ ...g, scope: '*' }, {})));
  if (!g.json) out(String(answer.text ?? ''));
  const deadline = asked + 60_000;
  for (;;) {
    await new Promise((r) => setTimeout(r, 100));
    let now: { pid: number; version: string; restarts: { planned: number; lastMs: number | null; adopted: number; lost: number } } | undefined;
    try {
      now = await withClient(g, (c) => c.call('daemon.status', {}));
    } catch {
      // the socket answers once the new image serves: wait on
    }
    if (now && now.restarts.planned > before.restarts.planned) {
      if (g.json) printJson({ ...answer, status: now });
      else {
        const lost = now.restarts.lost - before.restarts.lost;
        const kept = now.restarts.adopted - before.restarts.adopted;
        out(`procctld ${now.version} (pid ${now.pid}) serves again after ${now.restarts.lastMs ?? Date.now() - asked} ms: ${kept} session${kept === 1 ? '' : 's'} kept${lost ? `, ${lost} lost (see procctl ps)` : ''}.`);
        return lost ? EXIT.failed : EXIT.ok;
      }
      return EXIT.ok;
    }
    if (Date.now() > deadline) {
      process.stderr.write('procctl: the daemon has not served as a new image within 60 s; the old one may have refused at its last step (see its log: journalctl -u procctld)\n');
      return EXIT.failed;
    }
  }
}
