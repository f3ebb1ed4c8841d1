import { InvalidArgumentError, Option } from 'commander';
import { parseSshTarget } from './target.js';

/** The CLI's global `--host ssh://[user@]host[:port]`, checked as it is parsed (a bad one is a usage error). */
export function hostOption(): Option {
  return new Option('--host <url>', 'the daemon on another host, over ssh: ssh://[user@]host[:port] (default: $PROCCTL_HOST; ssh is $PROCCTL_SSH_COMMAND, default "ssh")').argParser(
    (value: string) => {
      try {
        parseSshTarget(value);
      } catch (err) {
        throw new InvalidArgumentError((err as Error).message);
      }
      return value;
    },
  );
}
