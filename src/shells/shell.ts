import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, constants, openSync, readSync, statSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import type { ExecParams } from '../schema/exec.js';
import type { Session } from '../session/session.js';
import { conflict } from '../base/errors.js';
import { holdReading } from '../base/hold-reading.js';
import { readStat } from '../runner/procfs.js';
import { findSessionProcesses, signalPids } from '../runner/sweep.js';
import { stopSession, type StopOptions } from '../runner/stop.js';
import { TerminalCuts, type CarriedCut } from './cuts.js';
import { ansiQuote } from './quote.js';

/** What a shell was made with (SPEC §20): a later command asking for other settings is refused. */
export interface ShellSettings {
  workdir: string;
  env: Record<string, string>;
  pty: boolean;
  elevated: boolean;
  stdin: 'pipe' | 'null';
  limits: ExecParams['limits'] | null;
  /** Review mode (SPEC §16): each command's changes held as a review session's (shells/review.ts). */
  review: boolean;
}

/** The shell's own descriptors: 61 takes the end of each command (id, status, cwd); 62 is the commands' stdin. */
const STATUS_FD = 61;
/** How often a paused command past its timeout looks again whether it was continued. */
const PAUSED_RECHECK_MS = 250;
/**
 * Signals an interactive bash outlives by default (it ignores or handles them): the only ones
 * `process signal` hands to the shell itself when the command has no process of its own.
 */
const SHELL_SURVIVES = new Set<NodeJS.Signals>(['SIGINT', 'SIGTERM', 'SIGQUIT', 'SIGWINCH', 'SIGCHLD', 'SIGCONT', 'SIGURG', 'SIGSTOP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU']);
const INPUT_FD = 62;
/** A terminal shell's own descriptors: 60 takes the cut after each command, 63 is the terminal the commands get. */
const CUT_FD = 60;
const TERMINAL_FD = 63;

/** The interactive bash a shell is: no rc files, no line editing; interactive so that SIGINT ends a command, not the shell. */
export const SHELL_BOOT = 'exec bash --noprofile --norc --noediting -i';

/**
 * What the shell is told first, on its stdin: its own descriptors on the two FIFOs, no prompt, no
 * history, aliases on, and PROMPT_COMMAND writing each command's end to fd 61, never to stdout.
 * `exit` keeps bash's "exit" note off the command's stderr.
 */
const SETUP = [
  `exec ${STATUS_FD}<>"$PROCCTL_TMPDIR/.shell-status" ${INPUT_FD}<>"$PROCCTL_TMPDIR/.shell-input"`,
  'PS1=; PS2=; PS0=; PS4=+; unset HISTFILE; set +o history; shopt -s expand_aliases',
  'exit() { builtin exit "$@" 2>/dev/null; }',
  '__procctl_id=ready',
  `PROMPT_COMMAND='__procctl_s=$?; printf "%s %s %s\\0" "$__procctl_id" "$__procctl_s" "$PWD" >&${STATUS_FD}'`,
].join('; ');

/**
 * A terminal shell's first line, typed on its terminal (its echo is before the first cut, so no
 * command's): bash keeps the terminal as fd 63 and from then on reads its commands from a FIFO
 * (opened read-write: it never reads an end there, when the daemon's end is closed across a restart),
 * so no command line is ever typed on the terminal (nor echoed there). After each command,
 * PROMPT_COMMAND writes the end to fd 61, then reads a fresh random cut from fd 60 (the daemon
 * makes it only once the command has ended, so no command can know it) and prints it on the
 * terminal: everything the terminal showed before it is the command's output.
 */
const TERMINAL_SETUP = [
  `exec ${TERMINAL_FD}<&0 ${STATUS_FD}<>"$PROCCTL_TMPDIR/.shell-status" ${CUT_FD}<>"$PROCCTL_TMPDIR/.shell-cut" 0<>"$PROCCTL_TMPDIR/.shell-commands"`,
  'PS1=; PS2=; PS0=; PS4=+; unset HISTFILE; set +o history; set +m; shopt -s expand_aliases',
  'exit() { builtin exit "$@" 2>/dev/null; }',
  '__procctl_id=ready',
  `PROMPT_COMMAND='__procctl_s=$?; printf "%s %s %s\\0" "$__procctl_id" "$__procctl_s" "$PWD" >&${STATUS_FD}; IFS= read -r __procctl_n <&${CUT_FD}; printf %s "$__procctl_n" >&${TERMINAL_FD}; unset __procctl_n'`,
].join('; ');

/** What a restart hands the next image of a shell besides its process (shells/carry.ts's schema). */
export interface CarriedShellState {
  name: string;
  scope: string;
  settings: ShellSettings;
  cwd: string;
  commands: number;
  createdAt: number;
  lastUsedAt: number;
  /** Read of the end records, not yet a whole one. */
  pending: string;
  /** The first cut sent and not yet seen on the terminal; `later`, those sent after it (shells/cuts.ts). */
  cut?: CarriedCut;
  later?: CarriedCut[];
  running?: { sessionId: string; interrupted: boolean; timeoutSec: number };
  settling?: Settling;
}

/** A crash's probe under way: its id, the command taken back with it, whether its line reads the spare itself (shells/cuts.ts). */
interface Settling {
  probe: string;
  command?: string;
  takesSpare?: boolean;
  /** Commands sent since the probe line (they run behind it): bash's count in its answer does not have them. */
  sent?: number;
  /** The directory in the probe's end record, said with its count once the probe is answered. */
  cwd?: string;
}

/** How a command's session is told of its end. */
interface Running {
  session: Session;
  timer?: NodeJS.Timeout;
  /** Its timeout, counted from the session's start (a restart arms it again). */
  timeoutSec: number;
  onTimeout: () => void;
  /** The shell was sent SIGINT for it: its end is an interrupt's. */
  interrupted: boolean;
}

/**
 * One persistent bash (SPEC §20): its own process (the `box` session, never listed) runs one
 * command at a time, each as a session of its own. The command's end comes on a FIFO only the
 * shell writes (fd 61, from PROMPT_COMMAND), never from the command's output, so nothing a
 * command prints can end it early; its output is the shell's stdout and stderr between the line
 * sent and that end.
 */
export class Shell {
  createdAt = Date.now();
  lastUsedAt = Date.now();
  commands = 0;
  cwd: string;
  private running: Running | undefined;
  private isReady = false;
  private readonly readyWaiters: (() => void)[] = [];
  private status: Socket | undefined;
  private statusFd: number | undefined;
  private input: Socket | undefined;
  /** A terminal shell's command lines (bash's fd 0) and the cuts it prints after each command. */
  private lines: Socket | undefined;
  private cutter: Socket | undefined;
  /** A terminal shell's output cut into commands (shells/cuts.ts). */
  private readonly cuts = new TerminalCuts({
    deliver: (stream, text) => this.deliver(stream, text),
    send: (line, done) => void this.cutter?.write(line, () => done?.()),
    readEndsNow: () => this.readStatusNow(),
  });
  private pending = '';
  private gone = false;
  /**
   * After a crash (SPEC §19): the probe sent to the shell, whose end record says which command it
   * ran last, with what status, and how many it ran; `command`: the command taken back with it, if
   * any (one younger than its first record was not, and may still run).
   */
  private settling: Settling | undefined;
  private readonly settleWaiters: (() => void)[] = [];
  /** The FIFO the commands read as stdin: what a command blocked on its input reads (SPEC §7's look). */
  inputPath: string | undefined;

  constructor(
    readonly name: string,
    readonly scope: string,
    readonly settings: ShellSettings,
    /** The shell's own process, as a session of the shells' private registry. */
    private readonly box: Session,
  ) {
    this.cwd = settings.workdir;
    void box.finished.then(() => this.ended());
  }

  /** The id of the shell's own process (its private session): what a sandboxed shell's channel belongs to. */
  get boxId(): string {
    return this.box.id;
  }

  get pid(): number | undefined {
    return this.box.pid;
  }

  get alive(): boolean {
    return !this.gone && this.box.running;
  }

  get busy(): Session | undefined {
    return this.running?.session;
  }

  /** Runs on a terminal (`pty: true`): its commands share it, as in a terminal window. */
  get pty(): boolean {
    return this.settings.pty;
  }

  /** A terminal shell's terminal, as its commands' sessions see it: what `write`/`send-keys` type, its pts, its resize. */
  get terminal(): { stdinId: string | undefined; resize: ((cols: number, rows: number) => void) | undefined } {
    return { stdinId: this.box.stdinId, resize: this.box.resize };
  }

  /** Wire the FIFOs and send the setup line; resolves once the shell's first prompt said it is ready. */
  async start(withinMs: number): Promise<void> {
    const dir = this.box.tmpdir;
    if (!dir || !this.box.running || !this.box.input) throw new Error('the shell did not start');
    if (this.pty && !this.box.pty) throw new Error('no terminal could be had for it (see the daemon log); make the shell without pty');
    const { statusPath, others } = this.fifos(dir);
    execFileSync('mkfifo', ['-m', '0600', statusPath, ...others]);
    // A sandbox user's scratch directory is theirs: so are the FIFOs in it.
    const owner = statSync(dir);
    if (owner.uid !== process.getuid?.()) for (const p of [statusPath, ...others]) chownSync(p, owner.uid, owner.gid);
    this.wire(dir);
    this.box.input.write(`${this.pty ? TERMINAL_SETUP : SETUP}\n`);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the shell did not answer within ${withinMs} ms`)), withinMs);
      this.readyWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
      void this.box.finished.then(() => {
        clearTimeout(timer);
        reject(new Error(`the shell ended as it started (${this.box.error ?? `exit ${this.box.exitCode ?? this.box.signal}`})`));
      });
    });
  }

  /** The FIFOs in the shell's scratch directory: its status; on pipes, the commands' stdin; on a terminal, bash's command lines and the cuts. */
  private fifos(dir: string): { statusPath: string; others: string[] } {
    const others = this.pty ? [join(dir, '.shell-commands'), join(dir, '.shell-cut')] : [join(dir, '.shell-input')];
    if (!this.pty) this.inputPath = others[0];
    return { statusPath: join(dir, '.shell-status'), others };
  }

  /** The daemon's ends of the FIFOs (the shell holds its own), and the shell's output routed to its command. */
  private wire(dir: string): void {
    const { statusPath, others } = this.fifos(dir);
    // Opened read-write: a FIFO with no writer would read as its end; the daemon's own writer keeps it open.
    this.statusFd = openSync(statusPath, constants.O_RDWR | constants.O_NONBLOCK);
    this.status = new Socket({ fd: this.statusFd, readable: true, writable: false });
    this.status.on('data', (b: Buffer) => this.onStatus(b.toString('utf8')));
    this.status.on('error', () => undefined);
    const writer = (path: string) => {
      const socket = new Socket({ fd: openSync(path, constants.O_RDWR | constants.O_NONBLOCK), readable: false, writable: true });
      socket.on('error', () => undefined);
      return socket;
    };
    if (this.pty) {
      this.lines = writer(others[0]);
      this.cutter = writer(others[1]);
    } else {
      this.input = writer(others[0]);
    }
    this.box.watchOutput((stream, text) => (this.pty ? this.cuts.output(stream, text) : this.deliver(stream, text)));
  }

  /** The shell's own process (its private session): a restart hands it on as any job (SPEC §19). */
  get process(): Session {
    return this.box;
  }

  /** The command running, if any. */
  get runningCommand(): Session | undefined {
    return this.running?.session;
  }

  /**
   * A restart's quiet moment: the end records stop being read (they wait in the FIFO for the next
   * image) until the returned resume; the shell's output is held with its process's.
   */
  hold(): () => void {
    return this.status ? holdReading(this.status) : () => undefined;
  }

  /** What the next image needs of the shell besides its process: what it had read of an end record, a cut under way, the command running. */
  carry(): CarriedShellState {
    const r = this.running;
    const [cut, ...later] = this.cuts.carry();
    return {
      name: this.name,
      scope: this.scope,
      settings: this.settings,
      cwd: this.cwd,
      commands: this.commands,
      createdAt: this.createdAt,
      lastUsedAt: this.lastUsedAt,
      pending: this.pending,
      ...(cut ? { cut } : {}),
      ...(later.length > 0 ? { later } : {}),
      ...(r ? { running: { sessionId: r.session.id, interrupted: r.interrupted, timeoutSec: r.timeoutSec } } : {}),
      ...(this.settling ? { settling: { ...this.settling } } : {}),
    };
  }

  /**
   * The shell as the last image left it (a planned restart): its process adopted already, the
   * daemon's ends of its FIFOs opened again by path (bash holds its own, and what was written and
   * not read waits in them), its command (if one runs) taken back with its timeout.
   */
  adopt(c: CarriedShellState, running: Session | undefined, onTimeout: () => void): void {
    this.cwd = c.cwd;
    this.createdAt = c.createdAt;
    this.commands = c.commands;
    this.lastUsedAt = c.lastUsedAt;
    this.pending = c.pending;
    this.isReady = true;
    if (running && c.running) {
      const r: Running = { session: running, interrupted: c.running.interrupted, timeoutSec: c.running.timeoutSec, onTimeout };
      this.running = r;
      this.armTimeout(r);
    }
    this.settling = c.settling && { ...c.settling };
    this.wire(this.box.tmpdir!);
    for (const cut of [...(c.cut ? [c.cut] : []), ...(c.later ?? [])]) this.cuts.resume(cut, this.thenOf(cut.status[0], cut.status[1]));
    // What was read of the end records and not yet acted on is acted on now.
    this.onStatus('');
  }

  /**
   * The shell as a crashed daemon left it (SPEC §19), adopted already: what the dead daemon knew
   * and did not write down (an end record it read, a cut it was to send, the commands it counted)
   * is asked of bash itself. A probe line, queued behind whatever bash runs, makes bash write one
   * more end record naming the last command it ran, its status and its count. On a terminal, one
   * spare cut goes to fd 60: bash takes it for the next end it writes, or prints it at once if it
   * was waiting for the cut of an end the dead daemon had read (docs/shells.md).
   */
  settleAfterCrash(): void {
    const dir = this.box.tmpdir!;
    try {
      // bash writes its status FIFO at each end: when it last did is when the shell was last used.
      this.lastUsedAt = Math.max(this.lastUsedAt, Math.round(statSync(join(dir, '.shell-status')).mtimeMs));
    } catch {
      // kept as the shell said when it was made
    }
    const probe = `probe-${randomBytes(6).toString('hex')}`;
    this.settling = { probe, ...(this.running ? { command: this.running.session.id } : {}), ...(this.pty ? { takesSpare: true } : {}) };
    const line = `__procctl_id="${probe}:$__procctl_id:$__procctl_s:$__procctl_c"`;
    if (!this.pty) {
      this.box.input!.write(`${line}\n`);
      return;
    }
    // The spare goes first; the probe line reads it itself if no end took it (`read -t 0` looks without waiting),
    // and its status says which: 0, it did (the spare is never printed); 1, an end before it did.
    this.cuts.sendSpare(() => this.lines!.write(`${line}; read -t 0 -u ${CUT_FD} && IFS= read -r __procctl_n <&${CUT_FD}\n`));
  }

  /** Taken back after a crash and not yet told by bash what it ran last, nor running a command taken back with it: a new command would share bash with one nobody knows. */
  get unsettled(): boolean {
    return this.settling !== undefined && this.settling.command === undefined && this.alive;
  }

  /** Resolves once bash answered the probe (or the shell ended), or after `ms`. */
  whenSettled(ms: number): Promise<void> {
    if (!this.unsettled) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.settleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Run one command in the shell as `session` (already made, registered and attached). */
  run(session: Session, command: string, o: { stdin: 'pipe' | 'null'; timeoutSec: number; checkpointKey?: string; onTimeout: () => void }): void {
    this.lastUsedAt = Date.now();
    this.commands++;
    if (this.settling) this.settling.sent = (this.settling.sent ?? 0) + 1;
    const running: Running = { session, interrupted: false, timeoutSec: o.timeoutSec, onTimeout: o.onTimeout };
    this.running = running;
    this.armTimeout(running);
    const exports = [`PROCCTL_SESSION_ID=${session.id}`, ...(o.checkpointKey ? [`PROCCTL_CHECKPOINT_KEY=${o.checkpointKey}`] : [])];
    if (this.pty) {
      const stdin = o.stdin === 'null' ? '0</dev/null' : `0<&${TERMINAL_FD}`;
      this.lines!.write(`__procctl_id=${session.id}; __procctl_c=${this.commands}; export ${exports.join(' ')}; eval ${ansiQuote(command)} ${stdin} ${STATUS_FD}>&- ${CUT_FD}<&- ${TERMINAL_FD}<&-\n`);
      return;
    }
    const stdin = o.stdin === 'null' ? '0</dev/null' : `0<&${INPUT_FD}`;
    this.box.input!.write(`__procctl_id=${session.id}; __procctl_c=${this.commands}; export ${exports.join(' ')}; eval ${ansiQuote(command)} ${stdin} ${STATUS_FD}>&- ${INPUT_FD}<&-\n`);
  }

  /** The command's timeout, counted from its session's start; time spent paused does not count (SPEC §15): at the deadline, a paused command waits on. */
  private armTimeout(running: Running): void {
    if (running.timeoutSec <= 0) return;
    const session = running.session;
    const due = () => session.startedAt + running.timeoutSec * 1000 + session.pausedMs();
    const check = () => {
      const left = due() - Date.now();
      if (session.paused || left > 0) running.timer = setTimeout(check, Math.max(left, PAUSED_RECHECK_MS));
      else running.onTimeout();
    };
    running.timer = setTimeout(check, Math.max(0, due() - Date.now()));
  }

  /** Output of the shell: the running command's once the shell is ready; before the first prompt and between commands, nobody's. */
  private deliver(stream: 'stdout' | 'stderr', text: string): void {
    if (this.isReady && this.running && text.length > 0) this.running.session.onOutput(stream, text);
  }

  /** What waits in the end records' FIFO, read now rather than on the loop's next turn. */
  private readStatusNow(): void {
    if (this.statusFd === undefined) return;
    const buf = Buffer.alloc(4096);
    for (;;) {
      let n = 0;
      try {
        n = readSync(this.statusFd, buf, 0, buf.length, null);
      } catch {
        return;
      }
      if (n <= 0) return;
      this.onStatus(buf.subarray(0, n).toString('utf8'));
    }
  }

  /** What a command's `write` goes to: the FIFO the command reads as its stdin. */
  commandInput(): { write(data: string | Buffer): void; end(): void; readonly queued: number } {
    // On a terminal, what is written is typed on it (end of input is ^D, as for any terminal session).
    if (this.pty) return this.box.input!;
    const input = this.input!;
    return {
      write: (data) => void input.write(data),
      // The FIFO is the shell's for every command: a command's end of input cannot close it.
      end: () => undefined,
      get queued() {
        return input.writableLength;
      },
    };
  }

  private onStatus(text: string): void {
    this.pending += text;
    for (;;) {
      const end = this.pending.indexOf('\0');
      if (end < 0) break;
      const line = this.pending.slice(0, end);
      this.pending = this.pending.slice(end + 1);
      const [id, code, ...rest] = line.split(' ');
      const cwd = rest.join(' ');
      const probe = this.settling && id.startsWith(`${this.settling.probe}:`) ? this.settling : undefined;
      // The probe's directory is said with its count, once it is answered (unless a later end said a newer one).
      if (cwd && probe) probe.cwd = cwd;
      else if (cwd) {
        this.cwd = cwd;
        if (this.settling) this.settling.cwd = undefined;
      }
      const then = this.thenOf(id, code);
      // Every end the shell writes waits for its cut (bash reads one before its next command).
      if (this.pty) this.cuts.ended(then, [id, code], probe && { took: probe.takesSpare ? code === '0' : undefined });
      // The status came after the command's output was written to the pipe, so the pipe was
      // readable when the status was read; but that read can have taken a second record that came
      // after this turn's poll (after a crash, the probe's end and at once that of the command
      // queued behind it), whose output the poll has not seen yet. The next turn's poll reads it
      // before that turn's immediates run: every byte the command wrote is its own.
      else setImmediate(() => setImmediate(then));
    }
  }

  /** What an end record does once its output is all read: the crash probe's answer settles the shell; another, as endOf. */
  private thenOf(id: string, code: string): () => void {
    return this.settling && id.startsWith(`${this.settling.probe}:`) ? this.settled(id) : this.endOf(id, code, this.running);
  }

  /** What an end record (id, status) does once its output is all read: the first prompt makes the shell ready; a command's end completes it. */
  private endOf(id: string, code: string, running: Running | undefined): () => void {
    return () => {
      if (id === 'ready' && !this.isReady) {
        this.isReady = true;
        for (const w of this.readyWaiters.splice(0)) w();
      } else if (running && running.session.id === id) this.complete(running, Number(code));
    };
  }

  /**
   * bash's answer to the probe (`probe:LASTID:STATUS:COUNT`): a command taken back that is still
   * running here ended while the dead daemon read its end, with that status; one bash never ran
   * last ended without one (its line was lost with the daemon).
   */
  private settled(id: string): () => void {
    return () => {
      const { last, status, count } = probeAnswer(id);
      const settling = this.settling;
      const taken = settling?.command;
      this.settling = undefined;
      for (const w of this.settleWaiters.splice(0)) w();
      if (settling?.cwd) this.cwd = settling.cwd;
      // bash counted up to the probe; the commands sent since run behind it.
      this.commands = Math.max(this.commands, count + (settling?.sent ?? 0));
      const running = this.running;
      // Only the command taken back with the shell: one sent since waits behind the probe, and ends by its own record.
      if (!running || running.session.id !== taken) return;
      if (last === taken && status !== undefined) this.complete(running, status);
      else {
        this.running = undefined;
        clearTimeout(running.timer);
        running.session.finish({ exitCode: null, signal: null });
      }
    };
  }

  private complete(running: Running, code: number): void {
    if (this.running !== running) return;
    this.running = undefined;
    clearTimeout(running.timer);
    this.lastUsedAt = Date.now();
    const interrupted = running.interrupted && (code === 0 || code === 130);
    running.session.finish(interrupted ? { exitCode: null, signal: 'SIGINT' } : { exitCode: Number.isFinite(code) ? code : null, signal: null });
  }

  /** The shell's process ended (`exit`, killed, closed): a running command ends with it. */
  private ended(): void {
    this.gone = true;
    for (const w of this.settleWaiters.splice(0)) w();
    this.cuts.clear();
    for (const socket of [this.status, this.input, this.lines, this.cutter]) socket?.destroy();
    const running = this.running;
    this.running = undefined;
    if (running) {
      clearTimeout(running.timer);
      running.session.finish({ exitCode: this.box.exitCode, signal: this.box.signal });
    }
  }

  /**
   * `process kill` of a command (SPEC §20): SIGINT to its processes and to the shell (bash drops
   * the command line, keeps its state), then §9's sequence for the command's processes; the shell
   * itself goes only when nothing else ends the command.
   */
  async interrupt(session: Session, opts: StopOptions): Promise<void> {
    const running = this.running;
    if (!running || running.session !== session) return;
    running.interrupted = true;
    session.stopEscalated(false);
    // A paused command is let run first, so that it sees the stop as it would unpaused.
    if (session.paused) this.continueCommand(session);
    const procs = () => this.commandPids(session);
    const first = procs();
    // The command's processes get SIGINT, and bash drops the rest of the line as a terminal's Ctrl-C makes it;
    // with none (a builtin loop), the shell itself gets it.
    if (first.length > 0) signalPids(first, 'SIGINT');
    else if (this.box.pid !== undefined) signalPids([this.box.pid], 'SIGINT');
    let ended = await endsWithin(session, Math.min(opts.graceMs, 1000));
    if (!ended) {
      signalPids(procs(), opts.signal);
      ended = await endsWithin(session, opts.graceMs);
    }
    if (!ended) {
      session.stopEscalated(true);
      signalPids(procs(), 'SIGKILL');
      ended = await endsWithin(session, 2000);
    }
    // A command that is the shell itself (a builtin loop trapping INT): the shell goes, its state with it.
    if (!ended) return this.close(opts.reason);
    // What the command left running (`job &` ignores SIGINT) goes with it: the stop signal, the grace, SIGKILL.
    const left = procs();
    if (left.length === 0) return;
    signalPids(left, opts.signal);
    const deadline = Date.now() + opts.graceMs;
    while (Date.now() < deadline && procs().length > 0) await new Promise((r) => setTimeout(r, 50));
    signalPids(procs(), 'SIGKILL');
  }

  /** The command's own processes: those carrying its PROCCTL_SESSION_ID (never the shell, nor an earlier command's jobs). */
  private commandPids(session: Session): number[] {
    return (findSessionProcesses(new Set([session.id]), this.box.pid ?? 0).get(session.id) ?? []).map((p) => p.pid);
  }

  /**
   * `process signal` of a command: to the command's processes only, never the shell's group (its
   * earlier commands' background jobs are not this command's). With none (a builtin running in
   * the shell itself) the shell gets it, but only a signal it outlives; another is refused.
   */
  signalCommand(session: Session, signal: NodeJS.Signals): { to: 'processes' | 'shell'; count: number } {
    if (this.running?.session !== session) throw conflict(`session ${session.id} is not the command running in shell "${this.name}"; there is nothing to signal`);
    const pids = this.commandPids(session);
    if (pids.length > 0) {
      signalPids(pids, signal);
      return { to: 'processes', count: pids.length };
    }
    if (!SHELL_SURVIVES.has(signal) || this.box.pid === undefined) {
      throw conflict(
        `session ${session.id} runs in shell "${this.name}" itself (a builtin, no process of its own), and ${signal} would end the shell with its state; send SIGINT to interrupt the command as Ctrl-C does, or stop it with process kill`,
        { sessionId: session.id, shell: this.name },
      );
    }
    signalPids([this.box.pid], signal);
    return { to: 'shell', count: 1 };
  }

  /**
   * `process pause` of a command (SPEC §15 for a session that is not a cgroup of its own): SIGSTOP
   * to the command's processes, looked for again until no new one appears (one forking as it was
   * stopped); with none (a builtin loop), to the shell that runs it. The shell's other jobs run on.
   * Returns why it could not, if it could not.
   */
  async pauseCommand(session: Session): Promise<string | undefined> {
    if (this.running?.session !== session) return 'it is not the command running in its shell';
    if (session.paused) return undefined;
    const stopped = new Set<number>();
    for (let round = 0; round < 20; round++) {
      const fresh = this.commandPids(session).filter((pid) => !stopped.has(pid));
      if (fresh.length === 0) break;
      signalPids(fresh, 'SIGSTOP');
      for (const pid of fresh) stopped.add(pid);
    }
    if (stopped.size === 0 && this.box.pid !== undefined) {
      signalPids([this.box.pid], 'SIGSTOP');
      stopped.add(this.box.pid);
    }
    const deadline = Date.now() + 2000;
    const isStopped = (pid: number) => {
      const state = readStat(pid)?.state;
      return state === undefined || state === 'T' || state === 'Z' || state === 'X';
    };
    while (![...stopped].every(isStopped)) {
      if (Date.now() > deadline) {
        signalPids([...stopped], 'SIGCONT');
        return 'its processes did not all stop within 2000 ms';
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    if (session.running) session.pause();
    else signalPids([...stopped], 'SIGCONT');
    return undefined;
  }

  /** `process continue` of a command: SIGCONT to its processes and to the shell (which a builtin's pause stopped). */
  continueCommand(session: Session): string | undefined {
    if (this.running?.session !== session) return 'it is not the command running in its shell';
    signalPids([...this.commandPids(session), ...(this.box.pid !== undefined ? [this.box.pid] : [])], 'SIGCONT');
    session.unpause();
    return undefined;
  }

  /** Close the shell: its process group gets §9's stop sequence. */
  async close(reason: StopOptions['reason'] = 'user', graceMs = 1000): Promise<void> {
    if (this.running && !this.running.session.stop) this.running.session.requestStop({ reason, signal: 'SIGTERM', at: Date.now() });
    // A paused command (or the shell a builtin's pause stopped) hears the stop as it would unpaused.
    if (this.running?.session.paused) this.continueCommand(this.running.session);
    await stopSession(this.box, { reason, signal: 'SIGHUP', graceMs });
  }

  /** Called when the first prompt came: wake whoever waits. */
  get ready(): boolean {
    return this.isReady;
  }
}

/** The last command, its status and the count in a probe's end record; a probe bash ran last (a second crash) is looked through. */
export function probeAnswer(id: string): { last: string; status: number | undefined; count: number } {
  const m = /^probe-[0-9a-f]{12}:(.*):([^:]*):([^:]*)$/.exec(id);
  if (!m) return { last: '', status: undefined, count: 0 };
  const count = /^\d+$/.test(m[3]) ? Number(m[3]) : 0;
  if (/^probe-[0-9a-f]{12}:/.test(m[1])) {
    const inner = probeAnswer(m[1]);
    return { ...inner, count: Math.max(count, inner.count) };
  }
  return { last: m[1], status: /^\d+$/.test(m[2]) ? Number(m[2]) : undefined, count };
}

async function endsWithin(session: Session, ms: number): Promise<boolean> {
  if (!session.running) return true;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)));
  const ended = session.finished.then(() => true);
  const result = await Promise.race([ended, timedOut]);
  clearTimeout(timer);
  return result;
}
