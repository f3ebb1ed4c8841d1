import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { buildNative } from './native.js';

/** One run of the C floor: its wall time and its own CPU (user + system), ms. */
export interface FloorRun {
  ms: number;
  cpuMs: number;
}

/**
 * The kernel's floor for starting a command and hearing its end: a C loop of posix_spawn +
 * waitpid (bench/native/spawn-floor.c), compiled now with the system's C compiler (`$CC`, else
 * `cc`), run one command per call. Resolves to why not (a string) when there is no compiler.
 */
export async function spawnFloor(env: NodeJS.ProcessEnv, file: string, args: string[]): Promise<SpawnFloor | string> {
  const built = buildNative('spawn-floor');
  if (typeof built === 'string') return built;
  const proc = spawn(built.bin, [file, ...args], { env, stdio: ['pipe', 'pipe', 'inherit'] });
  return new SpawnFloor(proc, built.dir);
}

export class SpawnFloor {
  private buffered = '';
  private waiting: ((line: string) => void) | undefined;
  private readonly exited: Promise<void>;

  constructor(
    private readonly proc: ChildProcess,
    private readonly dir: string,
  ) {
    proc.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.buffered += d;
      const nl = this.buffered.indexOf('\n');
      if (nl === -1) return;
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      const w = this.waiting;
      this.waiting = undefined;
      w?.(line);
    });
    this.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
  }

  /** One posix_spawn + waitpid, timed inside the helper (the pipe to it is not counted). */
  run(): Promise<FloorRun> {
    return new Promise((resolve, reject) => {
      const gone = () => reject(new Error(`the C spawn floor exited (${this.proc.exitCode ?? this.proc.signalCode})`));
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) return gone();
      this.proc.once('exit', gone);
      this.waiting = (line) => {
        this.proc.off('exit', gone);
        const [ms, cpuMs, code] = line.split(' ').map(Number);
        if (code !== 0) reject(new Error(`the C spawn floor's command exited with ${code}`));
        else resolve({ ms, cpuMs });
      };
      this.proc.stdin!.write('x');
    });
  }

  /** End the helper (its stdin closes; SIGKILL by pid if it does not go in 5 s) and remove its build. */
  async stop(): Promise<void> {
    this.proc.stdin!.end();
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    if (this.proc.exitCode === null && this.proc.signalCode === null) await this.exited;
    clearTimeout(timer);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
