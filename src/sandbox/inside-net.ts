/**
 * Run inside a sandbox whose network is by name (SPEC §12), as the parent of the job:
 * `node inside-net.js PORT FD -- COMMAND...`. It listens on 127.0.0.1:PORT and [::1]:PORT in the
 * sandbox's own network namespace (which has no route out), and joins each connection a job
 * makes there to a fresh stream to the daemon's proxy, asked for on descriptor FD (its proxy
 * channel: one byte, one stream, as the checkpoint channel does; no Unix socket is made, which
 * the sandbox's seccomp filter would refuse). Then it runs the command (which does not inherit
 * FD), passes on the signals it gets, and ends as the command ended.
 */
import { spawn } from 'node:child_process';
import { closeSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { loadAddon } from '../addon.js';
import { splice } from '../splice.js';

interface ChannelAddon {
  receiveConnection(socket: number, timeoutMs: number, kind?: number): number;
  setInheritable(fd: number, inheritable: boolean): void;
}

const PROXY_STREAM = 'p'.charCodeAt(0);
const [portArg, fdArg, dashes, ...command] = process.argv.slice(2);
const port = Number(portArg);
const channel = Number(fdArg);
if (!(port > 0) || !(channel >= 0) || dashes !== '--' || command.length === 0) {
  process.stderr.write('procctl: usage: inside-net.js PORT FD -- COMMAND...\n');
  process.exit(2);
}
const addon = loadAddon<ChannelAddon>(['receiveConnection', 'setInheritable']);
if (addon instanceof Error) {
  process.stderr.write(`procctl: the sandbox's network proxy cannot start: ${addon.message}\n`);
  process.exit(1);
}
// The job gets the proxy through the port only, never the channel itself.
addon.setInheritable(channel, false);

const onConnection = (job: Socket) => {
  let fd: number;
  try {
    fd = addon.receiveConnection(channel, 10_000, PROXY_STREAM);
  } catch {
    job.destroy();
    return;
  }
  splice(job, new Socket({ fd, readable: true, writable: true }));
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
  const server = createServer(onConnection);
  server.on('error', () => start()); // no IPv6 loopback here: IPv4 alone
  server.listen(port, host, start);
}
