import { Command } from 'commander';
import { loadAddon } from '../../base/addon.js';
import { packageVersion } from '../../base/version.js';
import { ConfigError, loadConfig } from '../../config/load.js';
import { requireSandbox } from '../../sandbox/host.js';
import { CARRIES, HANDOVER_FORMAT } from './format.js';

/**
 * `procctld --handover-format [--socket PATH] [--config FILE] [--log-level LEVEL]`: what a
 * restarting daemon asks the image it would start (SPEC §19), with its own options. It loads the
 * config, checks the sandbox the config asks for and loads the addon, as the image's start will,
 * then says the hand-over format it reads, its version and what it carries; else it says why not
 * and exits 2. It loads nothing else of the daemon (bin/procctld comes here first): the restart
 * waits for it while the old image serves, and the daemon's whole module graph took as long again
 * as the real start after it.
 */
export function runPreflight(argv: string[]): void {
  const program = new Command('procctld')
    .option('--socket <path>', 'Unix socket to listen on')
    .option('--config <file>', 'JSON config file')
    .option('--log-level <level>', 'fatal, error, warn, info, debug, trace or silent')
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));
  program.parse(argv, { from: 'user' });
  const opts = program.opts<{ config?: string }>();
  const fail = (message: string): never => {
    process.stderr.write(`procctld: ${message}\n`);
    process.exit(2);
  };
  let loaded;
  try {
    loaded = loadConfig(opts.config);
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  try {
    requireSandbox(loaded.config);
  } catch (err) {
    fail((err as Error).message);
  }
  const addon = loadAddon(['spawn', 'reap', 'exited', 'setInheritable', 'execImage', 'dupDescriptor', 'parkWaiters', 'setWindowSize']);
  if (addon instanceof Error) fail(addon.message);
  process.stdout.write(`${HANDOVER_FORMAT} ${packageVersion()} ${CARRIES.join(',')}\n`);
}
