import { access } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';

/** A check that is tried again, backing off, until it holds or is stopped. */
interface Probe {
  check(): Promise<boolean>;
  onHold(): void;
  startedAt: number;
  attempts: number;
  due: number;
  busy: boolean;
  stopped: boolean;
}

/**
 * The pause before a probe's next try: 5, 10, 20, 40 ms, then every 50 ms for its first 10 s
 * (a server that takes a while is still seen within 50 ms of opening), every 250 ms to one
 * minute, then every second.
 */
export function probeDelay(attempts: number, ageMs: number): number {
  if (ageMs >= 60_000) return 1000;
  if (ageMs >= 10_000) return 250;
  return Math.min(5 * 2 ** attempts, 50);
}

/**
 * Every readiness probe of the daemon on one timer, set for the earliest that is due: no timer
 * per session, and nothing at all while no session waits to be ready.
 */
class ProbeScheduler {
  private readonly probes = new Set<Probe>();
  private timer: NodeJS.Timeout | undefined;
  private timerDue = Infinity;

  /** Try `check` now and then as it backs off; `onHold` once it holds. Returns the function that stops it. */
  add(check: () => Promise<boolean>, onHold: () => void): () => void {
    const now = Date.now();
    const probe: Probe = { check, onHold, startedAt: now, attempts: 0, due: now, busy: false, stopped: false };
    this.probes.add(probe);
    this.arm();
    return () => {
      probe.stopped = true;
      this.probes.delete(probe);
    };
  }

  get size(): number {
    return this.probes.size;
  }

  private arm(): void {
    let due = Infinity;
    for (const p of this.probes) if (!p.busy && p.due < due) due = p.due;
    if (due >= this.timerDue) return;
    clearTimeout(this.timer);
    this.timerDue = due;
    if (due === Infinity) return;
    this.timer = setTimeout(() => this.run(), Math.max(0, due - Date.now()));
    this.timer.unref();
  }

  private run(): void {
    this.timer = undefined;
    this.timerDue = Infinity;
    const now = Date.now();
    for (const p of this.probes) {
      if (p.busy || p.due > now) continue;
      p.busy = true;
      p.check().then(
        (holds) => this.settle(p, holds),
        () => this.settle(p, false),
      );
    }
    this.arm();
  }

  private settle(p: Probe, holds: boolean): void {
    p.busy = false;
    if (p.stopped) return;
    if (holds) {
      p.stopped = true;
      this.probes.delete(p);
      p.onHold();
    } else {
      p.attempts++;
      const now = Date.now();
      p.due = now + probeDelay(p.attempts, now - p.startedAt);
    }
    this.arm();
  }
}

export const probes = new ProbeScheduler();

/** Does a TCP connection to `port` succeed? Without a host: 127.0.0.1 or ::1 (what `localhost` means to servers). */
export async function portAnswers(port: number, host?: string): Promise<boolean> {
  if (host !== undefined) return connects(port, host);
  const [v4, v6] = await Promise.all([connects(port, '127.0.0.1'), connects(port, '::1')]);
  return v4 || v6;
}

function connects(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Does a GET of `url` answer with `status` (by default any 2xx or 3xx)? Its body is not read. */
export function httpAnswers(url: URL, status?: number): Promise<boolean> {
  return new Promise((resolve) => {
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = request(url, { method: 'GET', agent: false, timeout: 2000, headers: { 'user-agent': 'procctl-waitfor' } }, (res) => {
      res.resume();
      const code = res.statusCode ?? 0;
      resolve(status === undefined ? code >= 200 && code < 400 : code === status);
      req.destroy();
    });
    req.once('timeout', () => req.destroy());
    req.once('error', () => resolve(false));
    req.end();
  });
}

/** Does `path` exist? */
export async function fileExists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
