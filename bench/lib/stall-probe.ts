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
 * it more often, whatever its code. Resolves to why not (a string) where it cannot be built.
 */
export function machineStalls(cpu?: number, windowUs = 50, pages = 300, gapUs = 150, windows = 10_000): MachineStalls | string {
  const built = buildNative('stall-probe');
  if (typeof built === 'string') return built;
  try {
    const args = [String(windowUs), String(pages), String(gapUs), String(windows)];
    const out = cpu === undefined ? execFileSync(built.bin, args, { encoding: 'utf8' }) : execFileSync('taskset', ['-c', String(cpu), built.bin, ...args], { encoding: 'utf8' });
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
  } finally {
    rmSync(built.dir, { recursive: true, force: true });
  }
}
