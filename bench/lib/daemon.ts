import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DAEMON_NODE_FLAGS } from '../../src/base/node-flags.js';
import { alive, liveProcesses } from './proc.js';
import { BenchClient } from './client.js';
import { sleep } from './stats.js';

/** The repository root, from dist/bench/lib/. */
export const ROOT = resolve(import.meta.dirname, '..', '..', '..');
const PROCCTLD = join(ROOT, 'bin', 'procctld');

/** The environment a bench daemon runs with, and so the one its commands see. */
export function daemonEnv(dir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    XDG_CONFIG_HOME: join(dir, 'config'),
    PROCCTL_STATE_DIR: join(dir, 'state'),
    PROCCTL_LOG_LEVEL: 'warn',
    ...extra,
  };
  for (const k of ['PROCCTL_SOCKET', 'PROCCTL_CONFIG', 'NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID']) delete env[k];
  return env;
}

/** A procctld on a temp socket with its own config and state dirs; stopped by pid, never by name. */
export class BenchDaemon {
  readonly pid: number;
  private output = '';
  private readonly exited: Promise<void>;

  private constructor(
    readonly dir: string,
    readonly socket: string,
    readonly env: NodeJS.ProcessEnv,
    private readonly proc: ChildProcess,
  ) {
    this.pid = proc.pid!;
    const keep = (d: string) => {
      this.output = (this.output + d).slice(-8000);
      this.onOutput?.(d);
    };
    proc.stdout!.setEncoding('utf8').on('data', keep);
    proc.stderr!.setEncoding('utf8').on('data', keep);
    this.exited = new Promise((r) => proc.once('exit', () => r()));
  }

  /** Told every piece of the daemon's stdout and stderr as it comes (e.g. to count `--trace-gc` lines). */
  onOutput: ((text: string) => void) | undefined;

  static live = new Set<BenchDaemon>();
  /** Processes of a stopped daemon (helpers, sessions) that outlived it; killed by pid, and reported. */
  static survivors: string[] = [];
  /** The daemon's own helper processes (children present before any session ran). */
  helpers: number[] = [];

  /** Extra node flags for every bench daemon (e.g. --cpu-prof), set from the command line. */
  static nodeArgs: string[] = [];
  /** Extra environment for every bench daemon (e.g. a config override), set from the command line. */
  static extraEnv: Record<string, string> = {};

  /** Start a daemon; `config` is written where it finds its config file (XDG_CONFIG_HOME) before it starts; `nodeArgs` are this daemon's own node flags. */
  static async start(extraEnv: Record<string, string> = {}, config?: unknown, after?: BenchDaemon, nodeArgs: string[] = []): Promise<BenchDaemon> {
    // `after`: a daemon killed by crash(): the new one takes its directory, socket and state.
    const dir = after?.dir ?? mkdtempSync(join(tmpdir(), 'procctl-bench-'));
    const socket = join(dir, 'run', 'procctl.sock');
    const env = daemonEnv(dir, { ...BenchDaemon.extraEnv, ...extraEnv });
    if (config !== undefined) {
      mkdirSync(join(env.XDG_CONFIG_HOME!, 'procctl'), { recursive: true });
      writeFileSync(join(env.XDG_CONFIG_HOME!, 'procctl', 'config.json'), JSON.stringify(config));
    }
    // With the daemon's own node flags, as bin/procctld's first line gives them (base/node-flags.ts).
    const proc = spawn(process.execPath, [...DAEMON_NODE_FLAGS, ...BenchDaemon.nodeArgs, ...nodeArgs, PROCCTLD, '--socket', socket], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    if (proc.pid === undefined) throw new Error('could not start procctld');
    const d = new BenchDaemon(dir, socket, env, proc);
    BenchDaemon.live.add(d);
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`procctld exited with ${proc.exitCode}: ${d.output}`);
      try {
        (await BenchClient.connect(socket)).close();
        d.helpers = d.descendants();
        return d;
      } catch {
        if (Date.now() > deadline) {
          await d.stop();
          throw new Error(`procctld did not listen on ${socket} within 20 s: ${d.output}`);
        }
        await sleep(20);
      }
    }
  }

  /** SIGKILL the daemon (a crash) and wait for it to be gone; its directory stays, for start(..., after). */
  async crash(): Promise<void> {
    BenchDaemon.live.delete(this);
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  client(): Promise<BenchClient> {
    return BenchClient.connect(this.socket);
  }

  get log(): string {
    return this.output;
  }

  /** Every live process below the daemon (its helpers and its sessions' processes). */
  descendants(): number[] {
    const out: number[] = [];
    let frontier = new Set([this.pid]);
    while (frontier.size) {
      const next = new Set(liveProcesses({ ppids: frontier }).map((p) => p.pid));
      out.push(...next);
      frontier = next;
    }
    return out;
  }

  /**
   * SIGTERM (the daemon stops its sessions and helpers), wait; SIGKILL by pid if it does not go
   * in 30 s. Then every process that was below it must be gone within 5 s; any that is not is
   * killed by pid and reported.
   */
  async stop(): Promise<void> {
    if (!BenchDaemon.live.delete(this)) return;
    const below = this.descendants();
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 30_000);
    await this.exited;
    clearTimeout(timer);
    rmSync(this.dir, { recursive: true, force: true });
    const deadline = Date.now() + 5000;
    let left = below.filter(alive);
    while (left.length && Date.now() < deadline) {
      await sleep(50);
      left = left.filter(alive);
    }
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    if (left.length) BenchDaemon.survivors.push(`procctld ${this.pid}: ${left.length} process(es) outlived it (${left.join(', ')}); killed by pid`);
    if (alive(this.pid)) BenchDaemon.survivors.push(`procctld ${this.pid} is still alive after stop`);
  }

  static async stopAll(): Promise<void> {
    await Promise.allSettled([...BenchDaemon.live].map((d) => d.stop()));
  }
}
