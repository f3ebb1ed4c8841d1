import { readFileSync, readlinkSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import type { Logger } from 'pino';
import { addonFix, loadAddon } from '../base/addon.js';

/** The first fd systemd passes (SD_LISTEN_FDS_START). */
const LISTEN_FDS_START = 3;

/**
 * Sockets passed by socket activation (LISTEN_FDS / LISTEN_PID), if they are meant for this
 * process. The variables are removed so no session inherits them.
 */
export function activatedFds(env: NodeJS.ProcessEnv = process.env): number[] {
  const fds = listenFds(env);
  delete env.LISTEN_FDS;
  delete env.LISTEN_PID;
  delete env.LISTEN_FDNAMES;
  return fds;
}

/** The sockets socket activation passes to this process, leaving the variables in place. */
export function listenFds(env: NodeJS.ProcessEnv = process.env): number[] {
  const count = Number(env.LISTEN_FDS);
  const forUs = env.LISTEN_PID === undefined || Number(env.LISTEN_PID) === process.pid;
  if (!forUs || !Number.isInteger(count) || count < 1) return [];
  return Array.from({ length: count }, (_, i) => LISTEN_FDS_START + i);
}

/**
 * The path a listening Unix socket descriptor is bound to (getsockname, which Node's pipes do
 * not offer): its inode from /proc/self/fd, its path from /proc/net/unix. Undefined when it is
 * not a Unix socket bound to an absolute path (unnamed, abstract, TCP), with why.
 */
export function boundPath(fd: number): { path: string } | { why: string } {
  let link: string;
  try {
    link = readlinkSync(`/proc/self/fd/${fd}`);
  } catch (err) {
    return { why: `descriptor ${fd} is not open (${(err as NodeJS.ErrnoException).code})` };
  }
  const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
  if (inode === undefined) return { why: `descriptor ${fd} is not a socket (${link})` };
  // Num RefCount Protocol Flags Type St Inode [Path]: the path, which may hold spaces, is the rest of the line.
  for (const line of readFileSync('/proc/net/unix', 'utf8').split('\n').slice(1)) {
    const m = /^\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\d+)(?: (.*))?$/.exec(line);
    if (m?.[1] !== inode) continue;
    const path = m[2];
    if (path === undefined || path === '') return { why: `the socket on descriptor ${fd} has no name` };
    if (path.startsWith('@')) return { why: `the socket on descriptor ${fd} is abstract (${path})` };
    if (!isAbsolute(path)) return { why: `the socket on descriptor ${fd} was bound to the relative path ${path}` };
    return { path };
  }
  return { why: `the socket on descriptor ${fd} is not a Unix socket` };
}

type NotifyAddon = { notify(path: string, message: string): void };

/**
 * sd_notify: READY=1, STOPPING=1, STATUS=…, WATCHDOG=1 to $NOTIFY_SOCKET, a Unix datagram
 * socket, which Node cannot send to by itself: the project's addon does it (native/notify.c),
 * prebuilt in the package, so it works whether or not the install ran any script. Without
 * NOTIFY_SOCKET every call does nothing.
 */
export class Notifier {
  private path: string | undefined;
  private addon: NotifyAddon | undefined;
  private watchdog: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: Logger,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    const path = env.NOTIFY_SOCKET;
    // An abstract socket is written with a leading '@', which the addon understands.
    this.path = path || undefined;
    const usec = Number(env.WATCHDOG_USEC);
    this.usec = usec > 0 ? usec : undefined;
    const watchdogForUs = env.WATCHDOG_PID === undefined || Number(env.WATCHDOG_PID) === process.pid;
    if (this.path && usec > 0 && watchdogForUs) {
      this.watchdog = setInterval(() => this.send({ WATCHDOG: '1' }), Math.max(1, Math.floor(usec / 2000)));
      this.watchdog.unref();
    }
    delete env.NOTIFY_SOCKET;
    delete env.WATCHDOG_USEC;
    delete env.WATCHDOG_PID;
  }

  private readonly usec: number | undefined;

  get enabled(): boolean {
    return this.path !== undefined;
  }

  /**
   * What the next image of this process needs to go on notifying (a planned restart, SPEC §19):
   * the variables this one took out of the environment, so no job inherits them.
   */
  handOn(): Record<string, string> {
    if (!this.path) return {};
    return { NOTIFY_SOCKET: this.path, ...(this.usec !== undefined && this.watchdog ? { WATCHDOG_USEC: String(this.usec), WATCHDOG_PID: String(process.pid) } : {}) };
  }

  send(fields: Record<string, string>): void {
    if (!this.path) return;
    if (!this.addon) {
      const addon = loadAddon<NotifyAddon>(['notify']);
      if (addon instanceof Error) {
        // Said once, then notification is off: repeating it every status update helps no one.
        this.log.warn({ err: addon.message, socket: this.path }, `cannot notify systemd: ${addon.message}; run the unit with Type=simple, or ${addonFix()}`);
        this.path = undefined;
        return;
      }
      this.addon = addon;
    }
    try {
      this.addon.notify(this.path, Object.entries(fields).map(([k, v]) => `${k}=${v.replace(/\n/g, ' ')}`).join('\n'));
    } catch (err) {
      this.log.warn({ err: (err as Error).message, socket: this.path }, 'sd_notify failed');
    }
  }

  close(): void {
    clearInterval(this.watchdog);
  }
}
