import { openSync } from 'node:fs';
import { closeQuietly } from '../base/close-quietly.js';
import { readOpen } from '../cgroup/files.js';
import { childrenOf, readStat } from './procfs.js';

/** Looks for the init after launch: 1, 2, 4 … 128 ms apart (about a quarter of a second in all). */
const LOOKS = 8;

/**
 * The init of a sandboxed session's PID namespace: bwrap's one child, which reaps the job and
 * exits once nothing of it is left; the namespace dies with it. The outer bwrap (the session's
 * leader) exits as soon as the job's shell does, so at that moment the init tells whether
 * anything of the job lives on, where otherwise only a scan of every process could (its zombie
 * keeps the process group answering until the host's init reaps it).
 */
export class SandboxInit {
  pid: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  /**
   * The init's children file, held open once it is found: at the leader's exit, on the way to an
   * exec's answer, one read says whether it is alone (an open, a stat, a read and a close of its
   * stat and again of this file took ~120 µs of the daemon's thread there, docs/benchmarks.md).
   * It names the init's task itself, not whichever process has its pid later.
   */
  private children: number | undefined;

  constructor(private readonly leader: number) {
    this.look(0);
  }

  private look(n: number): void {
    this.timer = undefined;
    const [init] = childrenOf(this.leader);
    if (init !== undefined) {
      this.pid = init;
      try {
        this.children = openSync(`/proc/${init}/task/${init}/children`, 'r');
      } catch {
        // gone already: gone() looks by its pid
      }
    } else if (n < LOOKS) {
      this.timer = setTimeout(() => this.look(n + 1), 2 ** n);
      this.timer.unref();
    }
  }

  /** Stop looking (the session is over). */
  release(): void {
    clearTimeout(this.timer);
    if (this.children !== undefined) closeQuietly(this.children);
    this.children = undefined;
  }

  /**
   * After the leader exited: true when nothing of the job is left. Every process of the
   * namespace descends from its init or was handed to it as an orphan, so an init without
   * children is alone there and exits by itself; one with children has leftovers to stop.
   * False too when the init was never found.
   */
  gone(): boolean {
    const held = this.children === undefined ? undefined : readOpen(this.children);
    this.release();
    if (this.pid === undefined) return false;
    // Its children file reads empty once it has none, is a zombie or was reaped.
    if (held !== undefined) return held.trim() === '';
    const stat = readStat(this.pid);
    if (!stat || stat.state === 'Z' || stat.state === 'X') return true;
    return childrenOf(this.pid).length === 0;
  }
}
