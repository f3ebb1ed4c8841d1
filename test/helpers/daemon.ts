import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { TestClient } from './rpc.js';
import { DAEMON_NODE_FLAGS } from '../../src/base/node-flags.js';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const PROCCTLD = join(ROOT, 'bin', 'procctld');
export const PROCCTL = join(ROOT, 'bin', 'procctl');

/** Poll `cond` until it holds or the deadline passes (generous: CI machines are loaded). */
export async function waitFor<T>(cond: () => T | Promise<T>, { timeoutMs = 20_000, everyMs = 20, what = 'condition' } = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** True if a process with this pid exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

export interface TestDaemon {
  dir: string;
  /** The environment it runs with (PROCCTL_STATE_DIR among it). */
  env: NodeJS.ProcessEnv;
  socket: string;
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  client(): Promise<TestClient>;
  /** SIGTERM, wait for exit; SIGKILL if it does not go. Returns the exit code. */
  stop(): Promise<number | null>;
}

export interface StartOptions {
  env?: Record<string, string>;
  config?: unknown;
  args?: string[];
  /** A command the daemon runs under, e.g. `['prlimit', '--nofile=256:256', '--']`. */
  launcher?: string[];
  /** Where its temp directory (socket, state, config) is made; the system's temp dir by default. */
  base?: string;
  /** A regular file its stdout and stderr go to (as `procctld > file 2>&1` does), instead of pipes; `stdout()` reads it. */
  logFile?: string;
  /** The procctld script to run: another installed build (a copy of the package); this checkout's by default. */
  procctld?: string;
  /** Descriptors from 3 on that it inherits, as spawn's stdio takes them (a pipe left open by whoever started it). */
  extraFds?: ('pipe' | 'ignore' | number)[];
}

const started = new Set<TestDaemon>();

/** Start a real procctld on a temp socket, with its own config and state dirs. */
export async function startDaemon(opts: StartOptions = {}): Promise<TestDaemon> {
  const dir = mkdtempSync(join(opts.base ?? tmpdir(), 'procctl-test-'));
  const socket = join(dir, 'run', 'procctl.sock');
  const args = ['--socket', socket, ...(opts.args ?? [])];
  if (opts.config !== undefined) {
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify(opts.config));
    args.push('--config', file);
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    XDG_CONFIG_HOME: join(dir, 'config'),
    PROCCTL_STATE_DIR: join(dir, 'state'),
    PROCCTL_LOG_LEVEL: 'warn',
    // A test that kills the daemon expects its sessions killed with it; a test of a crash that keeps them asks for "keep".
    PROCCTL_ON_CRASH: 'kill',
    ...opts.env,
  };
  delete env.PROCCTL_SOCKET;
  // The daemon's own node flags, as bin/procctld's first line gives them (base/node-flags.ts).
  const [file, ...pre] = [...(opts.launcher ?? []), process.execPath, ...DAEMON_NODE_FLAGS];
  const logFd = opts.logFile === undefined ? undefined : openSync(opts.logFile, 'a', 0o644);
  const proc = spawn(file, [...pre, opts.procctld ?? PROCCTLD, ...args], { env, stdio: ['ignore', logFd ?? 'pipe', logFd ?? 'pipe', ...(opts.extraFds ?? [])] });
  if (logFd !== undefined) closeSync(logFd);
  let out = '';
  let err = '';
  proc.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d));
  const readLog = () => {
    try {
      return readFileSync(opts.logFile!, 'utf8');
    } catch {
      return '';
    }
  };
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  const d: TestDaemon = {
    dir,
    env,
    socket,
    proc,
    stdout: () => (opts.logFile === undefined ? out : readLog()),
    stderr: () => (opts.logFile === undefined ? err : readLog()),
    client: () => TestClient.connect(socket),
    async stop() {
      started.delete(d);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      // A session's scratch directory can still be written as it goes (ENOTEMPTY): tried again.
      rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
      removeSubtrees(env.PROCCTL_STATE_DIR!);
      return code;
    },
  };
  started.add(d);
  await untilListening(socket, proc, d.stderr);
  return d;
}

/** Wait until the daemon `proc` answers a connection on `socket`; fail at once if it exits. */
export async function untilListening(socket: string, proc: ChildProcess, said: () => string = () => ''): Promise<void> {
  await waitFor(
    async () => {
      if (proc.exitCode !== null) throw new Error(`procctld exited with ${proc.exitCode}: ${said()}`);
      try {
        (await TestClient.connect(socket)).close();
        return true;
      } catch {
        return false;
      }
    },
    // A daemon's start is a Node start and its module graph: seconds, not milliseconds, at load 20 on two cores.
    { what: 'procctld to listen', timeoutMs: 45_000 },
  );
}

/**
 * The cgroup subtrees a daemon with this state directory names after itself (src/cgroup/host.ts),
 * emptied and removed: a daemon a test SIGKILLed and never restarted leaves them on this shared machine.
 */
export function removeSubtrees(stateDir: string): void {
  const name = `procctld-${createHash('sha256').update(stateDir).digest('hex').slice(0, 12)}`;
  const own = new Map<string, string>();
  for (const [id, names, ...path] of readFileSync('/proc/self/cgroup', 'latin1').split('\n').map((l) => l.split(':'))) {
    if (path.length === 0) continue;
    for (const n of id === '0' ? [''] : names.split(',')) own.set(n, path.join(':'));
  }
  for (const line of readFileSync('/proc/self/mountinfo', 'latin1').split('\n')) {
    const [type, , opts = ''] = (line.split(' - ')[1] ?? '').split(' ');
    if (type !== 'cgroup' && type !== 'cgroup2') continue;
    const path = type === 'cgroup2' ? own.get('') : opts.split(',').map((n) => own.get(n)).find((p) => p !== undefined);
    if (path === undefined) continue;
    const top = join(line.split(' ')[4], path, name);
    if (!existsSync(top)) continue;
    for (const child of readdirSync(top, { withFileTypes: true }).filter((e) => e.isDirectory())) {
      const dir = join(top, child.name);
      for (let i = 0; i < 50 && existsSync(dir); i++) {
        try {
          if (existsSync(join(dir, 'cgroup.kill'))) writeFileSync(join(dir, 'cgroup.kill'), '1');
          else for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'latin1').split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
          rmdirSync(dir);
        } catch {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
        }
      }
    }
    try {
      rmdirSync(top);
    } catch {
      // still busy: the next run of a daemon on this socket empties it
    }
  }
}

/** Stop every daemon a test file started and did not stop. */
export async function stopAllDaemons(): Promise<void> {
  await Promise.all([...started].map((d) => d.stop()));
}

/** What a person's client sends with an approval's answer (SPEC §8): the credential the daemon made beside its socket. */
export function asPerson(d: { socket: string }): { approverToken: string } {
  return { approverToken: readFileSync(`${d.socket}.approver`, 'utf8').trim() };
}
