import { createRequire } from 'node:module';
import type { Logger } from 'pino';

/** The first fd systemd passes (SD_LISTEN_FDS_START). */
const LISTEN_FDS_START = 3;

/**
 * Sockets passed by socket activation (LISTEN_FDS / LISTEN_PID), if they are meant for this
 * process. The variables are removed so no session inherits them.
 */
export function activatedFds(env: NodeJS.ProcessEnv = process.env): number[] {
  const count = Number(env.LISTEN_FDS);
  const forUs = env.LISTEN_PID === undefined || Number(env.LISTEN_PID) === process.pid;
  delete env.LISTEN_FDS;
  delete env.LISTEN_PID;
  delete env.LISTEN_FDNAMES;
  if (!forUs || !Number.isInteger(count) || count < 1) return [];
  return Array.from({ length: count }, (_, i) => LISTEN_FDS_START + i);
}

interface DgramSocket {
  send(buf: Buffer, offset: number, length: number, path: string, cb?: (err?: Error) => void): void;
  on(event: 'error', fn: (err: Error) => void): void;
  close(): void;
}

/**
 * sd_notify: READY=1, STOPPING=1, STATUS=…, WATCHDOG=1 to $NOTIFY_SOCKET (a unix datagram
 * socket, which Node cannot send to by itself: unix-dgram does it). Without NOTIFY_SOCKET every
 * call does nothing.
 */
export class Notifier {
  private path: string | undefined;
  private socket: DgramSocket | undefined;
  private watchdog: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: Logger,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    const path = env.NOTIFY_SOCKET;
    // An abstract socket is written with a leading '@'.
    this.path = path ? (path.startsWith('@') ? `\0${path.slice(1)}` : path) : undefined;
    const usec = Number(env.WATCHDOG_USEC);
    const watchdogForUs = env.WATCHDOG_PID === undefined || Number(env.WATCHDOG_PID) === process.pid;
    if (this.path && usec > 0 && watchdogForUs) {
      this.watchdog = setInterval(() => this.send({ WATCHDOG: '1' }), Math.max(1, Math.floor(usec / 2000)));
      this.watchdog.unref();
    }
    delete env.NOTIFY_SOCKET;
    delete env.WATCHDOG_USEC;
    delete env.WATCHDOG_PID;
  }

  get enabled(): boolean {
    return this.path !== undefined;
  }

  send(fields: Record<string, string>): void {
    if (!this.path) return;
    if (!this.socket) {
      try {
        this.socket = this.open();
      } catch (err) {
        // Said once, then notification is off: repeating it every status update helps no one.
        this.log.warn(
          { err: (err as Error).message.split('\n')[0], socket: this.path },
          'cannot notify systemd: the optional unix-dgram module did not install (it needs python3, make and a C compiler at npm ci); run the unit with Type=simple, or install the toolchain and run npm ci again',
        );
        this.path = undefined;
        return;
      }
    }
    try {
      const msg = Buffer.from(Object.entries(fields).map(([k, v]) => `${k}=${v.replace(/\n/g, ' ')}`).join('\n'));
      this.socket.send(msg, 0, msg.length, this.path, (err) => {
        if (err) this.log.warn({ err: err.message, socket: this.path }, 'sd_notify failed');
      });
    } catch (err) {
      this.log.warn({ err: (err as Error).message, socket: this.path }, 'sd_notify failed');
    }
  }

  private open(): DgramSocket {
    const unix = createRequire(import.meta.url)('unix-dgram') as { createSocket(type: 'unix_dgram'): DgramSocket };
    const socket = unix.createSocket('unix_dgram');
    socket.on('error', (err) => this.log.warn({ err: err.message }, 'sd_notify socket error'));
    return socket;
  }

  close(): void {
    clearInterval(this.watchdog);
    this.socket?.close();
    this.socket = undefined;
  }
}
