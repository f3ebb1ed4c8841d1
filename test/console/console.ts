import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { request } from 'node:http';
import { PROCCTL, PROCCTLD, untilListening, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { TestClient } from '../helpers/rpc.js';
import { DAEMON_NODE_FLAGS } from '../../src/base/node-flags.js';

/** A `procctl ui` under test: its link, its origin, and how to stop it (by pid). */
export interface TestConsole {
  url: string;
  origin: string;
  port: number;
  token: string;
  proc: ChildProcess;
  stdout(): string;
  stderr(): string;
  stop(): Promise<void>;
}

const running = new Set<TestConsole>();

/** Start `procctl ui` against a test daemon and wait for its one line. */
export async function startConsole(d: Pick<TestDaemon, 'socket' | 'env'>, args: string[] = [], env: Record<string, string> = {}, reach = ['--socket', d.socket]): Promise<TestConsole> {
  const proc = spawn(process.execPath, [PROCCTL, ...reach, 'ui', ...args], { env: { ...d.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  proc.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<void>((r) => proc.on('exit', () => r()));
  await waitFor(
    () => {
      if (proc.exitCode !== null) throw new Error(`procctl ui exited ${proc.exitCode}: ${err}`);
      return out.includes('\n');
    },
    { what: 'procctl ui to print its link' },
  );
  const url = out.split('\n')[0];
  const u = new URL(url);
  const c: TestConsole = {
    url,
    origin: u.origin,
    port: Number(u.port),
    token: u.searchParams.get('token')!,
    proc,
    stdout: () => out,
    stderr: () => err,
    async stop() {
      running.delete(c);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    },
  };
  running.add(c);
  return c;
}

export async function stopAllConsoles(): Promise<void> {
  await Promise.all([...running].map((c) => c.stop()));
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request with exactly the headers given (Host included), as an attacker could send it. */
export function http(url: string, opts: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? 'GET', headers: opts.headers, setHost: opts.headers?.host === undefined }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => (body += s));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Trade the console's token for its cookie, as the person's browser does: `name=value`. */
export async function cookieOf(c: TestConsole): Promise<string> {
  const r = await http(c.url);
  if (r.status !== 303) throw new Error(`the token trade answered ${r.status}: ${r.body}`);
  return String((r.headers['set-cookie'] as string[])[0]).split(';')[0];
}

/** Debian's chromium, where it is: the browser tests say so and skip without it. */
export const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
if (!CHROMIUM) process.stderr.write('skipping the console browser tests: no chromium (apt-get install -y chromium)\n');

/** Debian's chromium, headless, driven by playwright-core (the tests run as root: no sandbox of its own). */
export const launchBrowser = (args: string[] = []): Promise<Browser> => chromium.launch({ executablePath: CHROMIUM!, args: ['--no-sandbox', ...args] });

/** Read a console's stream of pushes until `until` holds for what came so far; returns it. */
export function pushesUntil(c: TestConsole, cookie: string, until: (text: string) => boolean, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(`${c.origin}/api/events`, { headers: { cookie } }, (res) => {
      let text = '';
      const timer = setTimeout(() => {
        req.destroy();
        reject(new Error(`the pushes did not hold what was awaited within ${timeoutMs} ms: ${text.slice(0, 2000)}`));
      }, timeoutMs);
      res.setEncoding('utf8');
      res.on('data', (s: string) => {
        text += s;
        if (until(text)) {
          clearTimeout(timer);
          req.destroy();
          resolve(text);
        }
      });
    });
    req.on('error', (e) => (e.message.includes('aborted') ? undefined : reject(e)));
    req.end();
  });
}

const placed = new Set<ChildProcess>();

/**
 * A daemon on a socket path of the test's choosing (its state and config under `dir`), so a second
 * one can take the first one's place when the test stops it by its pid.
 */
export async function daemonAt(socket: string, dir: string): Promise<ChildProcess> {
  const env = { ...process.env, PROCCTL_STATE_DIR: `${dir}/state`, XDG_CONFIG_HOME: `${dir}/config`, PROCCTL_LOG_LEVEL: 'warn' };
  delete env.PROCCTL_SOCKET;
  const p = spawn(process.execPath, [...DAEMON_NODE_FLAGS, PROCCTLD, '--socket', socket], { env, stdio: 'ignore' });
  placed.add(p);
  p.once('exit', () => placed.delete(p));
  await untilListening(socket, p);
  return p;
}

/** Stop the daemons daemonAt started that still run (SIGKILL: their tests are over). */
export function stopPlacedDaemons(): void {
  for (const p of placed) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
}
