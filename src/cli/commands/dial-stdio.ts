import type { Command } from 'commander';
import { resolveSocketPath } from '../../config/paths.js';

// Only the socket path and the bridge are loaded: every remote command pays for this start-up.
export function registerDialStdio(program: Command): void {
  program
    .command('dial-stdio')
    .summary("connect stdin/stdout to this host's daemon, byte for byte (what --host runs over ssh)")
    .description(
      "Connect stdin and stdout to this host's procctld socket, byte for byte, until either side closes.\n" +
        '`procctl --host ssh://HOST ...` runs `ssh HOST procctl dial-stdio` and speaks the protocol through it; an ' +
        'authorized_keys line may force this command for a key (docs/remote.md).\n' +
        'Exit status 0 when either side closed; 3 when the daemon cannot be reached.',
    )
    .action(async (_o: unknown, cmd: Command) => {
      const g = cmd.optsWithGlobals<{ socket?: string; host?: string }>();
      if (g.host !== undefined) {
        process.stderr.write("procctl: dial-stdio connects to this host's daemon; --host does not apply to it (use --socket to name the socket)\n");
        process.exit(2);
      }
      const { dialStdio } = await import('../../remote/dial-stdio.js');
      // stdin may still be open when the daemon closes: end here rather than wait for it.
      process.exit(await dialStdio(resolveSocketPath(g.socket)));
    });
}
