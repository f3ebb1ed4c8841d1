import { randomBytes } from 'node:crypto';

/** How long a cut may take to come back through the terminal before its end goes on without it. */
export const CUT_MS = 3000;

/** A fresh cut: `procctl-` and 24 hex digits, made only once the end it follows was read, so no command can know it. */
export function newCut(): string {
  return `procctl-${randomBytes(12).toString('hex')}`;
}

/** A cut as a restart hands it on: its text, what was held of the output while it was looked for, the end record it follows. */
export interface CarriedCut {
  text: string;
  held: string;
  status: [string, string];
  /** The spare a crash's adoption sent, not yet taken by an end. */
  spare?: boolean;
}

export interface CutsHost {
  /** What the terminal showed: the running command's (or nobody's, between commands). */
  deliver(stream: 'stdout' | 'stderr', text: string): void;
  /** Write a cut's line to the shell's fd 60; `done` once it is there. */
  send(line: string, done?: () => void): void;
  /** Read at once what waits in the end records' FIFO, each record handed to `ended` before this returns. */
  readEndsNow(): void;
}

interface Cut extends CarriedCut {
  then: () => void;
  timer?: NodeJS.Timeout;
}

/**
 * A terminal shell's output, cut into commands (docs/shells.md "On a terminal"). After each end
 * record bash reads a line from fd 60 and prints it on the terminal; the daemon writes a fresh
 * cut there for each end it reads, in the order it reads them, so bash prints them in that order:
 * the cuts wait in a queue, and only the first is looked for. What the terminal shows before it is
 * the output of the command that end closes; what follows it goes on to the next cut, or to the
 * command running (one sent behind the crash's probe runs as soon as the probe's cut is printed).
 * Nothing is dropped but a cut's own text.
 *
 * After a crash, one spare cut is sent before anything else (settleAfterCrash): it is the first cut
 * bash reads from then on, for whichever end comes first. bash prints it for an end record this
 * daemon reads (the first one that is not the probe's), or for an end the dead daemon had read, or
 * not at all: the probe line reads it itself when it is still waiting in fd 60, and its status says
 * so (0 when it took it). Which one it was never depends on which descriptor is read first.
 */
export class TerminalCuts {
  private readonly queue: Cut[] = [];

  constructor(
    private readonly host: CutsHost,
    private readonly waitMs = CUT_MS,
  ) {}

  /** A cut is sent and not yet seen (bash waits on it or prints it): the shell's output is looked through. */
  get pending(): boolean {
    return this.queue.length > 0;
  }

  /**
   * An end record was read. `probe`: it is the crash probe's, and `took` says whether the probe
   * line read the spare itself (undefined for a probe an older image sent, which did not).
   */
  ended(then: () => void, status: [string, string], probe?: { took: boolean | undefined }): void {
    const head = this.queue[0];
    if (head?.spare) {
      if (!probe || probe.took === undefined) {
        // The first end after the crash (or an older image's probe): bash read the spare for it.
        Object.assign(head, { spare: false, then, status });
        head.timer = this.arm(head);
        return;
      }
      if (probe.took) {
        // Never printed: what was held while it was looked for is the output as it came.
        this.queue.shift();
        if (head.held) this.host.deliver('stdout', head.held);
      } else {
        // Printed for an end the dead daemon had read: it closes the output of that command, which the probe's answer ends.
        Object.assign(head, { spare: false, then: () => undefined, status: ['', ''] });
        head.timer = this.arm(head);
      }
    }
    this.push({ text: newCut(), held: '', status, then }, true);
  }

  /** After a crash: the spare, sent before anything else this daemon sends to fd 60; `done` once it is in the FIFO. */
  sendSpare(done: () => void): void {
    if (this.queue.length > 0) return done();
    const cut: Cut = { text: newCut(), held: '', status: ['', ''], then: () => undefined, spare: true };
    this.host.send(`${cut.text}\n`, done);
    this.queue.push(cut);
  }

  /** A cut an earlier image sent, in the order it was sent (a planned restart). */
  resume(c: CarriedCut, then: () => void): void {
    this.push({ ...c, then }, false);
  }

  /** What a restart hands on: the cuts sent and not yet seen, in order. */
  carry(): CarriedCut[] {
    return this.queue.map(({ text, held, status, spare }) => ({ text, held, status, ...(spare ? { spare: true } : {}) }));
  }

  private push(cut: Cut, send: boolean): void {
    if (send) this.host.send(`${cut.text}\n`);
    this.queue.push(cut);
    if (this.queue.length === 1 && !cut.spare) cut.timer = this.arm(cut);
  }

  /** What the terminal showed. */
  output(stream: 'stdout' | 'stderr', text: string): void {
    const cut = this.queue[0];
    if (!cut) return this.host.deliver(stream, text);
    cut.held += text;
    const at = cut.held.indexOf(cut.text);
    if (at < 0) {
      // Held back only as much as could be the cut's start.
      const keep = cut.text.length - 1;
      if (cut.held.length > keep) {
        this.host.deliver(stream, cut.held.slice(0, cut.held.length - keep));
        cut.held = cut.held.slice(cut.held.length - keep);
      }
      return;
    }
    const held = cut.held;
    // The spare came back: an end record written before bash read it is in the FIFO (or read already) and takes it;
    // with none, it was for an end the dead daemon had read.
    if (cut.spare) this.host.readEndsNow();
    if (cut.spare) Object.assign(cut, { spare: false });
    this.host.deliver(stream, held.slice(0, at));
    this.finish(cut);
    const rest = held.slice(at + cut.text.length);
    // What follows goes on: to the next cut's look, or to the command running (sent behind the probe), or nobody.
    if (rest) this.output(stream, rest);
  }

  private finish(cut: Cut): void {
    if (this.queue[0] !== cut) return;
    this.queue.shift();
    clearTimeout(cut.timer);
    cut.then();
    const next = this.queue[0];
    if (next && !next.spare && !next.timer) next.timer = this.arm(next);
  }

  /**
   * The cut did not come (the command stopped the terminal's output with ^S, or closed fd 63): its
   * end goes on with what came. Looked at once more after the loop's next poll, so that a daemon
   * that was not run for the whole wait reads what came in time before giving up on it.
   */
  private arm(cut: Cut): NodeJS.Timeout {
    return setTimeout(() => {
      setImmediate(() => {
        if (this.queue[0] !== cut) return;
        const held = cut.held;
        cut.held = '';
        this.host.deliver('stdout', held);
        this.finish(cut);
      });
    }, this.waitMs);
  }

  /** The shell ended: nothing is looked for any more. */
  clear(): void {
    for (const cut of this.queue) clearTimeout(cut.timer);
    this.queue.length = 0;
  }
}
