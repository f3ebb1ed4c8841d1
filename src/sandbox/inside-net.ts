/**
 * Run inside a sandbox whose network is by name (SPEC §12), as the parent of the job:
 * `node inside-net.js PORT FD -- COMMAND...`. It listens on 127.0.0.1:PORT and [::1]:PORT in the
 * sandbox's own network namespace (which has no route out), and hands each connection a job
 * makes there to the daemon's proxy over descriptor FD (its proxy channel, a socket pair; no
 * Unix socket is made, which the sandbox's seccomp filter would refuse): the connection itself
 * goes, so no byte of the job's traffic is copied here. Then it runs the command (which does not
 * inherit FD), passes on the signals it gets, and ends as the command ended.
 */
import { spawn } from 'node:child_process';
import { closeSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { loadAddon } from '../addon.js';

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
const addon = loadAddon<ChannelAddon>(['sendDescriptor', 'setInheritable']);
if (addon instanceof Error) {
  process.stderr.write(`procctl: the sandbox's network proxy cannot start: ${addon.message}\n`);
  process.exit(1);
}
// The job gets the proxy through the port only, never the channel itself.
addon.setInheritable(channel, false);

/** Hand the accepted connection to the daemon; this process keeps no copy of it. */
const onConnection = (job: Socket) => {
  const fd = (job as unknown as { _handle?: { fd?: number } })._handle?.fd;
  // A full channel (the daemon far behind) or a closed one: the job sees its connection refused.
  if (typeof fd === 'number' && fd >= 0) addon.sendDescriptor(channel, fd);
  job.destroy();
};

let listening = 0;
const start = () => {
  if (++listening < 2) return;
  const child = spawn(command[0], command.slice(1), { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGWINCH', 'SIGCONT'] as const) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('error', (err) => {
    process.stderr.write(`procctl: cannot run ${command[0]}: ${err.message}\n`);
    process.exit(127);
  });
  child.on('exit', (code, signal) => {
    closeSync(channel);
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  });
};
for (const host of ['127.0.0.1', '::1']) {
  const server = createServer({ pauseOnConnect: true }, onConnection);
  server.on('error', () => start()); // no IPv6 loopback here: IPv4 alone
  server.listen(port, host, start);
}
