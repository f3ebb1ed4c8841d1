/**
 * Run inside a sandbox whose network is by name (SPEC §12), as the parent of the job:
 * `node inside-net.js PORT FD -- COMMAND...`. It listens on 127.0.0.1:PORT and [::1]:PORT in the
 * sandbox's own network namespace (which has no route out), hands the listening sockets
 * themselves to the daemon over descriptor FD (its proxy channel, a socket pair; no Unix socket
 * is made, which the sandbox's seccomp filter would refuse), and lets go of its own copies and of
 * the channel before the job starts. The daemon then accepts the job's connections itself: no
 * connection and no byte of the job's traffic passes through here, and the job has nothing left
 * to write to the daemon with. Then it runs the command, passes on the signals it gets, and ends
 * as the command ended.
 */
import { spawn } from 'node:child_process';
import { closeSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { loadAddon } from '../base/addon.js';

interface ChannelAddon {
  sendDescriptor(socket: number, fd: number): boolean;
  setInheritable(fd: number, inheritable: boolean): void;
}

const [portArg, fdArg, dashes, ...command] = process.argv.slice(2);
const port = Number(portArg);
const channel = Number(fdArg);
if (!(port > 0) || !(channel >= 0) || dashes !== '--' || command.length === 0) {
  process.stderr.write('procctl: usage: inside-net.js PORT FD -- COMMAND...\n');
  process.exit(2);
}
const loaded = loadAddon<ChannelAddon>(['sendDescriptor', 'setInheritable']);
if (loaded instanceof Error) {
  process.stderr.write(`procctl: the sandbox's network proxy cannot start: ${loaded.message}\n`);
  process.exit(1);
}
const addon: ChannelAddon = loaded;
// The job gets the proxy through the port only, never the channel itself.
addon.setInheritable(channel, false);

/** Listen on HOST:PORT here; undefined where the address is not (no IPv6 loopback: IPv4 alone). */
function listen(host: string): Promise<Server | undefined> {
  return new Promise((resolve) => {
    // Nobody connects before the job starts, and by then the daemon holds the socket alone.
    const server = createServer({ pauseOnConnect: true }, (stray) => stray.destroy());
    server.once('error', () => resolve(undefined));
    server.listen(port, host, () => resolve(server));
  });
}

/** Hand each listening socket to the daemon and close every copy of ours: true if the daemon has one. */
function handOver(servers: Server[]): boolean {
  let sent = 0;
  for (const server of servers) {
    const fd = (server as unknown as { _handle?: { fd?: number } })._handle?.fd;
    if (typeof fd === 'number' && fd >= 0 && addon.sendDescriptor(channel, fd)) sent++;
    server.close();
  }
  closeSync(channel);
  return sent > 0;
}

function run(): void {
  const child = spawn(command[0], command.slice(1), { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGWINCH', 'SIGCONT'] as const) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('error', (err) => {
    process.stderr.write(`procctl: cannot run ${command[0]}: ${err.message}\n`);
    process.exit(127);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  });
}

const servers = (await Promise.all(['127.0.0.1', '::1'].map(listen))).filter((s): s is Server => s !== undefined);
if (!handOver(servers)) {
  const why = servers.length === 0 ? `nothing can listen on 127.0.0.1:${port} in the sandbox's network namespace` : 'the daemon did not take the listening socket (it is stopping, or this session ended)';
  process.stderr.write(`procctl: the sandbox's network proxy cannot start: ${why}; the session's job was not run\n`);
  process.exit(1);
}
run();
