import type { Command } from 'commander';
import { act, EXIT, globalsOf, note, out, UsageError } from '../context.js';
import { wholeNumber } from '../options.js';

interface UiOptions {
  port?: number;
  listen?: string;
  url?: string;
  open?: boolean;
  service?: boolean;
  link?: boolean;
  linkFile?: string;
}

export function registerUi(program: Command): void {
  // For ui, --host may be given more than once, and as `local` or NAME=…: checked with the others when ui runs.
  program.options.find((opt) => opt.long === '--host')?.argParser((v: string, all: string | string[] | undefined) => (all === undefined ? v : [...([] as string[]).concat(all), v]));
  program
    .command('ui')
    .summary("serve the person's console: every scope's sessions, approvals and changes, live, in a browser")
    .description(
      'A web console on 127.0.0.1 and a free port (--port, --listen for another loopback address or a Unix socket ' +
        'path a reverse proxy forwards to). Prints one line, the link with a one-time token; open it in your ' +
        'browser (--open does). The console acts as the operator (the adminToken: --scope \'*\' --token or $PROCCTL_ADMIN_TOKEN; else the approver ' +
        'credential: $PROCCTL_APPROVER_TOKEN, or the file beside a local socket) and answers approvals as you; it serves until interrupted. ' +
        'Several daemons in one page (the fleet view): repeat --host, each "local" (this host\'s, at --socket) or ' +
        'ssh://[user@]host[:port], either optionally named NAME=…; each host\'s credentials may be given as ' +
        '$PROCCTL_ADMIN_TOKEN_<NAME> and $PROCCTL_APPROVER_TOKEN_<NAME>. Run as a service (--service, as ' +
        '`procctl daemon install --ui` sets up), it keeps its link in a file only you can read instead of printing ' +
        'it, and `procctl ui --link` prints it (a fresh one after each use). See docs/console.md.',
    )
    .option('--port <n>', 'the TCP port (default: a free one)', wholeNumber(0))
    .option('--listen <addr|path>', 'a loopback address (default 127.0.0.1), or a Unix socket path for a reverse proxy')
    .option('--url <url>', "with a Unix socket: the address the browser uses through the proxy (its Host and Origin are the console's own)")
    .option('--open', 'start the browser on the link')
    .option('--service', 'keep the link in the link file (0600, a fresh one after each use) instead of printing it: for systemd, whose journal others may read')
    .option('--link', "print the link of the console running as a service (from its link file), and exit")
    .option('--link-file <path>', "the service's link file (default: ui.url beside the daemon's socket)")
    .action(
      act(async (o: UiOptions, cmd: Command) => {
        const g = globalsOf(cmd);
        // One ssh:// --host is the one daemon, as for every command; more, or `local` or NAME=…, the fleet.
        const given = g.host === undefined ? [] : ([] as string[]).concat(g.host);
        const hosts = given.length > 1 || given.some((v) => !/^ssh:\/\//i.test(v)) ? given : undefined;
        if (o.link) {
          const { linkFilePath, readLinkFile, openBrowser } = await import('../../console/serve.js');
          const url = readLinkFile(o.linkFile ?? linkFilePath(g.socket, hosts ? undefined : given[0]));
          out(url);
          if (o.open) openBrowser(url, note);
          return EXIT.ok;
        }
        // Loaded only here: nothing else needs the console's server.
        const { parseHosts, serveConsole } = await import('../../console/serve.js');
        if (hosts) {
          try {
            parseHosts(hosts);
          } catch (err) {
            throw new UsageError((err as Error).message);
          }
        }
        await serveConsole({
          host: hosts ? undefined : given[0],
          hosts,
          socket: g.socket,
          port: o.port,
          listen: o.listen,
          url: o.url,
          open: o.open,
          service: o.service,
          linkFile: o.linkFile,
          adminToken: g.scope === '*' ? g.token : undefined,
          print: out,
          say: note,
        });
        return EXIT.ok;
      }),
    );
}
