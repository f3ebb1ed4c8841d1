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

  constructor(private readonly leader: number) {
    this.look(0);
  }

  private look(n: number): void {
    this.timer = undefined;
    const [init] = childrenOf(this.leader);
    if (init !== undefined) this.pid = init;
    else if (n < LOOKS) {
      this.timer = setTimeout(() => this.look(n + 1), 2 ** n);
      this.timer.unref();
    }
  }

  /** Stop looking (the session is over). */
  release(): void {
    clearTimeout(this.timer);
  }

  /**
   * After the leader exited: true when nothing of the job is left. Every process of the
   * namespace descends from its init or was handed to it as an orphan, so an init without
   * children is alone there and exits by itself; one with children has leftovers to stop.
   * False too when the init was never found.
   */
  gone(): boolean {
    this.release();
    if (this.pid === undefined) return false;
    const stat = readStat(this.pid);
    if (!stat || stat.state === 'Z' || stat.state === 'X') return true;
    return childrenOf(this.pid).length === 0;
  }
}
