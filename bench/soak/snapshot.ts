import { mkdirSync, readdirSync } from 'node:fs';
import type { BenchClient } from '../lib/client.js';
import { sleep } from '../lib/stats.js';

/**
 * Heap snapshots of the daemon, for finding what grows: node writes one into `dir` on SIGUSR2
 * (`--heapsnapshot-signal`), holding the daemon's thread while it writes. Compare two in Chrome
 * DevTools (Memory, "Comparison").
 */
export class HeapSnapshots {
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  /** The node flags the daemon must start with. */
  nodeArgs(): string[] {
    return ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${this.dir}`];
  }

  private count(): number {
    return readdirSync(this.dir).filter((f) => f.endsWith('.heapsnapshot')).length;
  }

  /** Ask for one and wait until it is written: the daemon answers again only once it is. */
  async take(pid: number, client: BenchClient): Promise<void> {
    const before = this.count();
    process.kill(pid, 'SIGUSR2');
    const deadline = Date.now() + 60_000;
    while (this.count() === before) {
      if (Date.now() > deadline) throw new Error(`the daemon wrote no heap snapshot into ${this.dir} within 60 s`);
      await sleep(100);
    }
    await client.call('daemon.status');
  }
}
