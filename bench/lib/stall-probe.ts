import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { buildNative } from './native.js';

/** One kind of window of the probe: the share held up by 20 µs or more (%), and the median hold-up (µs). */
export interface Stalls {
  percent: number;
  medianUs: number;
}

/** What the probe's windows met: arithmetic of `windowUs`, and `pages` pages read after `gapUs` away. */
export interface MachineStalls {
  windowUs: number;
  pages: number;
  gapUs: number;
  compute: Stalls;
  touch: Stalls;
}

/**
 * How often this machine holds up a running thread (bench/native/stall-probe.c), on `cpu` when
 * given (taskset), else where the kernel puts it: the context a p99 is read in. On a machine whose
 * hypervisor takes the CPU away now and then, each microsecond a request runs and each page it
 * touches after a pause is a chance of waiting ~100 µs; a server that does more per request meets
 * it more often, whatever its code. Built once (`stallProbe`), run as often as asked, removed by
 * `close`.
 */
export class StallProbe {
  private constructor(private readonly bin: string, private readonly dir: string) {}

  /** The probe built, or why not (a string) where it cannot be. */
  static build(): StallProbe | string {
    const built = buildNative('stall-probe');
    return typeof built === 'string' ? built : new StallProbe(built.bin, built.dir);
  }

  /** One run: `windows` of each kind; why not (a string) when it fails. */
  run(cpu?: number, windowUs = 50, pages = 300, gapUs = 150, windows = 10_000): MachineStalls | string {
    try {
      const args = [String(windowUs), String(pages), String(gapUs), String(windows)];
      const out = cpu === undefined ? execFileSync(this.bin, args, { encoding: 'utf8' }) : execFileSync('taskset', ['-c', String(cpu), this.bin, ...args], { encoding: 'utf8' });
      const kinds = new Map(
        out
          .trim()
          .split('\n')
          .map((line) => line.split(' '))
          .map(([kind, , percent, median]) => [kind, { percent: Number(percent), medianUs: Number(median) }]),
      );
      const compute = kinds.get('compute');
      const touch = kinds.get('pages');
      if (!compute || !touch) return `bench/native/stall-probe.c said nothing readable: ${JSON.stringify(out)}`;
      return { windowUs, pages, gapUs, compute, touch };
    } catch (err) {
      return `bench/native/stall-probe.c failed: ${(err as Error).message}`;
    }
  }

  /** Remove the build. */
  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
