import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config/load.js';
import { ProcctlDaemon } from './daemon.js';
import { resolveSocketPath } from '../config/paths.js';
import { channelDescriptor } from '../transport/channel.js';
import { SocketInUseError } from './socket.js';
import { StateDirInUseError } from './state.js';
import { activatedFds, boundPath } from './systemd.js';
import { packageVersion } from '../base/version.js';
import { closeInherited } from './inherited.js';
import { readInherited } from './handover/in.js';
import { runPreflight } from './handover/preflight.js';
import { loadAddon } from '../base/addon.js';
import { mark, type ImageStart } from './handover/timeline.js';

/** `procctld [--socket PATH] [--config FILE] [--log-level LEVEL]`: run the daemon in the foreground. */
export async function runDaemon(argv: string[], image?: ImageStart): Promise<void> {
  // A restarting daemon asks the image it would start whether it can take over (SPEC §19): with the
  // same options, it loads the config and the addon and checks the sandbox, then says its format.
  if (argv[0] === '--handover-format') return runPreflight(argv.slice(1));
  mark('modules');
  // A planned restart's hand-over names descriptors to keep; it is read before anything is closed.
  const { inherited, keep } = readInherited();
  // Before anything is opened: what it inherited must not reach a job.
  closeInherited(process.env, keep);
  if (keep.length > 0) {
    // Kept for this image only: no job started from now on inherits them.
    const addon = loadAddon<{ setInheritable(fd: number, on: boolean): void }>(['setInheritable']);
    if (!(addon instanceof Error)) for (const fd of keep) addon.setInheritable(fd, false);
  }
  mark('handover');
  const opts = plainOptions(argv) ?? (await commanderOptions(argv));

  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  if (opts.logLevel !== undefined && !levels.includes(opts.logLevel)) {
    process.stderr.write(`procctld: --log-level ${JSON.stringify(opts.logLevel)} is not a level; use one of ${levels.join(', ')}\n`);
    process.exit(2);
  }
  let loaded;
  try {
    loaded = loadConfig(opts.config);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`procctld: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  mark('config');
  // Socket activation: the socket systemd hands over decides where the files beside it go.
  const listenFds = inherited ? [] : activatedFds();
  const socketPath = listenFds.length > 0 ? activatedSocketPath(listenFds[0], opts.socket) : resolveSocketPath(opts.socket);
  if (channelDescriptor(socketPath) !== undefined) {
    process.stderr.write(`procctld: the socket "${socketPath}" is a session's channel (PROCCTL_SOCKET inside a confined session), not a place to listen; pass --socket PATH\n`);
    process.exit(2);
  }
  const daemon = new ProcctlDaemon({ socketPath, listenFds, configFile: opts.config, loaded, logLevel: opts.logLevel, inherited, args: argv, image });
  // Handlers before listening: whoever can connect may also signal us, and gets a graceful stop.
  let starting: Promise<void> = Promise.resolve();
  const stop = (signal: NodeJS.Signals) => {
    void starting
      .catch(() => undefined)
      .then(() => daemon.shutdown(signal))
      .then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('SIGHUP', () => void starting.then(() => daemon.reload(), () => undefined));
  // A planned restart (SPEC §19; the units' ExecReload): the sessions go to the procctld installed now.
  process.on('SIGUSR2', () =>
    void starting.then(
      () => daemon.restart().catch((err: Error) => daemon.log.error({ err: err.message }, 'restart refused; this image goes on serving')),
      () => undefined,
    ),
  );
  try {
    starting = daemon.start();
    await starting;
  } catch (err) {
    const known = err instanceof SocketInUseError || err instanceof StateDirInUseError;
    const message = known ? (err as Error).message : `cannot start on ${socketPath}: ${(err as Error).message}`;
    process.stderr.write(`procctld: ${message}\n`);
    process.exit(1);
  }
  process.on('uncaughtException', (err) => daemon.log.error({ err }, 'uncaught exception; still serving'));
  process.on('unhandledRejection', (err) => daemon.log.error({ err }, 'unhandled rejection; still serving'));
}

type Options = { socket?: string; config?: string; logLevel?: string };

/**
 * The options of a daemon started to serve (`--socket`, `--config`, `--log-level`, each with its
 * value), read with node's own parser; undefined for anything else (`--help`, `--version`, an
 * unknown option, a missing value, an argument), which commander answers as it always did. Loading
 * commander was about 25 ms and 0.9 MB of a start that only reads three options, a planned restart's
 * among them (docs/benchmarks.md "The new image's start").
 */
function plainOptions(argv: string[]): Options | undefined {
  try {
    const { values } = parseArgs({ args: argv, options: { socket: { type: 'string' }, config: { type: 'string' }, 'log-level': { type: 'string' } }, strict: true, allowPositionals: false });
    return { socket: values.socket, config: values.config, logLevel: values['log-level'] };
  } catch {
    return undefined;
  }
}

/** The options as commander reads them: its help, its version and its errors (exit 2). */
async function commanderOptions(argv: string[]): Promise<Options> {
  const { Command } = await import('commander');
  const program = new Command('procctld')
    .description('Run the procctl daemon in the foreground.')
    .option('--socket <path>', 'Unix socket to listen on')
    .option('--config <file>', 'JSON config file')
    .option('--log-level <level>', 'fatal, error, warn, info, debug, trace or silent')
    .version(packageVersion())
    .showHelpAfterError()
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));
  program.parse(argv, { from: 'user' });
  return program.opts<Options>();
}

/**
 * Where an activated daemon's socket is (SPEC §2): the inherited socket's own path, so the
 * approver credential and the runtime directory go beside the socket clients reach. A --socket
 * that names another path is refused: the daemon would listen on one and place its files by the other.
 */
function activatedSocketPath(fd: number, flag: string | undefined): string {
  const bound = boundPath(fd);
  if ('why' in bound) {
    process.stderr.write(`procctld: socket activation handed over descriptor ${fd}, but ${bound.why}; give the unit a ListenStream= with an absolute path\n`);
    process.exit(2);
  }
  if (flag !== undefined && resolve(flag) !== bound.path) {
    process.stderr.write(`procctld: --socket ${flag} is not the socket systemd handed over (${bound.path}); drop --socket, or make it the same path as the unit's ListenStream=\n`);
    process.exit(2);
  }
  return bound.path;
}
