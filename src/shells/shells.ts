import { conflict, limit, unavailable } from '../base/errors.js';
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { removeDir } from '../runner/scratch.js';
import { commandSession, startJob, type JobRequest, type LaunchContext } from '../runner/start.js';
import { readStat } from '../runner/procfs.js';
import { stopSession, stopsItself } from '../runner/stop.js';
import type { ExecParams } from '../schema/exec.js';
import type { RecordKeeper } from '../session/keeper.js';
import { ALL_SCOPES, Registry } from '../session/registry.js';
import { carrySession, resumeSession, type CarriedSession } from '../session/carry.js';
import { adoptJob, cannotHandOver, handOver, type HandedJob } from '../runner/handover.js';
import { adoptChannels } from '../runner/start.js';
import type { CarriedShell } from './carry.js';
import { Session, type SessionDecision } from '../session/session.js';
import { SHELL_BOOT, Shell, type ShellSettings } from './shell.js';
import { ReviewShell, reviewScript } from './review.js';

/** A review shell's state rides in its next command's arguments: past this it would not fit (the kernel's 128 KiB an argument). */
const MAX_STATE_CHARS = 100_000;
/** How long a new shell has to show its first prompt. */
const START_MS = 10_000;
/** How long a command waits for a shell taken back after a crash to say it is idle (shell.ts settleAfterCrash). */
const SETTLE_MS = 2_000;
/** How often idle shells are looked for. */
const SWEEP_MS = 5_000;

/** A command for a shell, as the exec tool hands it over once policy let it through. */
export interface ShellCommand {
  scope: string;
  params: ExecParams & { shell: string };
  cwd: string;
  policy: JobRequest['policy'];
  decision?: SessionDecision;
  /** An approved exec takes the id of the session that waited for it. */
  id?: string;
  /** Review mode (SPEC §16): each command's changes are held as a review session's. */
  review?: JobRequest['review'];
}

/** What `shell.list` shows of one shell. */
export interface ShellView {
  name: string;
  scope: string;
  pid: number | null;
  cwd: string;
  state: 'idle' | 'busy';
  sessionId: string | null;
  commands: number;
  createdAt: string;
  lastUsedAt: string;
  settings: ShellSettings;
}

const keyOf = (scope: string, name: string) => `${scope}\u0000${name}`;

/** One shell in a planned restart's hand-over (daemon/handover/schema.ts). */
export interface CarriedShellEntry {
  shell: CarriedShell;
  box?: { session: CarriedSession; job: HandedJob };
  command?: CarriedSession;
}

/**
 * The scopes' persistent shells (SPEC §20): made on first use, refused when busy or asked for
 * other settings, closed when idle past `shells.idleMs`, at most `shells.max` a scope.
 * A shell's own process is a session of a private registry: never listed, never recorded.
 */
export class Shells {
  private readonly shells = new Map<string, Shell | ReviewShell>();
  private readonly boxes = new Registry();
  private readonly opening = new Map<string, Promise<Shell | ReviewShell>>();
  /** The shell each command session ran in: pause, continue and signal reach the command through it. */
  private readonly commandsOf = new WeakMap<Session, Shell>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly ctx: LaunchContext,
    private readonly warn: (msg: string, err: unknown) => void = () => undefined,
  ) {
    this.timer = setInterval(() => this.closeIdle(), SWEEP_MS);
    this.timer.unref();
  }

  /** Start a command in its shell; the answer says the shell's name, its cwd, and whether it was made anew after its end. */
  async run(c: ShellCommand): Promise<{ session: Session; warnings: string[]; shell: Shell | ReviewShell; restarted: boolean; why?: string }> {
    const { scope, params: p } = c;
    let shell = this.shells.get(keyOf(scope, p.shell));
    let restarted = false;
    // A shell the last daemon had, which a crash could not keep: this command's is made anew, and says why.
    const why = shell ? undefined : this.lostInCrash.get(keyOf(scope, p.shell));
    if (why !== undefined) {
      this.lostInCrash.delete(keyOf(scope, p.shell));
      restarted = true;
    }
    if (shell && !shell.alive) {
      this.forget(shell);
      // Made anew as it was (its workdir, env, terminal, limits, review mode), but for what this command names.
      c = madeAgain(c, shell.settings);
      shell = undefined;
      restarted = true;
    }
    const settings = settingsOf(c);
    // Taken back after a crash: bash says in a moment whether it still runs a command nobody knows.
    if (shell instanceof Shell && shell.unsettled) await shell.whenSettled(SETTLE_MS);
    if (shell) {
      checkSettings(shell, p, settings);
      const busy = shell.busy;
      if (busy) {
        throw conflict(
          `shell "${shell.name}" is running session ${busy.id} (${busy.name}); wait for it (process wait {"sessionIds":["${busy.id}"]}) or stop it (process kill {"sessionId":"${busy.id}"}), then send the command again`,
          { sessionId: busy.id, shell: shell.name },
        );
      }
      if (shell instanceof Shell && shell.unsettled) {
        throw conflict(
          `shell "${shell.name}" was taken back after the daemon's crash and may still run a command the crashed daemon started (younger than its first record, so not kept); send the command again in a moment, or close the shell (shell.close)`,
          { shell: shell.name },
        );
      }
    } else {
      shell = await this.open(c, settings);
    }
    if (shell instanceof ReviewShell) {
      const lost = this.lostState.has(shell);
      this.lostState.delete(shell);
      return { ...this.startReview(shell, c), shell, restarted: restarted || lost };
    }
    return { ...this.start(shell, c), shell, restarted, ...(why !== undefined ? { why } : {}) };
  }

  /** Shells a crash could not keep, by scope and name: the next command in one says it was made anew, and why. */
  private readonly lostInCrash = new Map<string, string>();

  /** A shell of the crashed daemon's that this one could not take back (handover/crash.ts). */
  noteLost(scope: string, name: string, why: string): void {
    this.lostInCrash.set(keyOf(scope, name), why);
  }

  /** Review shells whose last command ended the shell (`exit`): the next command says its state is gone. */
  private readonly lostState = new WeakSet<ReviewShell>();

  /** A review shell's command: a review session of its own, whose bash starts from the shell's state and leaves it as the command did. */
  private startReview(shell: ReviewShell, c: ShellCommand): { session: Session; warnings: string[] } {
    if (shell.state.length > MAX_STATE_CHARS) {
      throw limit(`review shell "${shell.name}" holds ${shell.state.length} characters of state (variables, functions), more than a command can carry (${MAX_STATE_CHARS}); unset what it no longer needs in a command, or close it (shell.close) and start anew`, { shell: shell.name });
    }
    const s = shell.settings;
    // A directory that exists only in an earlier command's held changes is not there until applied: the command starts in the shell's workdir.
    const cwd = existsSync(shell.cwd) ? shell.cwd : s.workdir;
    const params: ExecParams = { ...c.params, env: s.env, pty: s.pty, elevated: s.elevated, limits: s.limits ?? undefined };
    const started = startJob(this.ctx, {
      scope: c.scope,
      params,
      cwd,
      policy: c.policy,
      approved: c.id === undefined ? undefined : { id: c.id, history: [] },
      review: c.review ?? { approval: false },
      decision: c.decision,
      shell: { name: shell.name, script: reviewScript(shell.state, c.params.command, cwd) },
    });
    void shell.track(started.session).then((lost) => {
      if (lost) this.lostState.add(shell);
      this.saveReview();
    });
    this.saveReview();
    return started;
  }

  private start(shell: Shell, c: ShellCommand): { session: Session; warnings: string[] } {
    const config = this.ctx.config();
    const cfg = config.tools.exec;
    const p = c.params;
    const id = c.id ?? this.ctx.registry.newId();
    const checkpointKey = this.ctx.registry.newId() + this.ctx.registry.newId();
    const session = new Session({
      ...commandSession(this.ctx, id, p, cfg),
      scope: c.scope,
      cwd: shell.cwd,
      checkpointKey,
      shell: shell.name,
      decision: c.decision,
    });
    this.ctx.registry.add(session);
    this.attachCommand(shell, session, p.stdin ?? 'pipe', false);
    shell.run(session, p.command, {
      stdin: p.stdin ?? 'pipe',
      timeoutSec: p.timeout ?? cfg.timeoutSec,
      checkpointKey,
      onTimeout: this.onTimeout(session),
    });
    this.ctx.keeper.watch(session, { now: c.id !== undefined, shell: { box: shell.boxId, timeoutSec: p.timeout ?? cfg.timeoutSec } });
    session.emit('started', { name: session.name, command: session.command, pid: session.pid ?? null, cwd: session.cwd, shell: shell.name });
    return { session, warnings: [] };
  }

  /** A command's session wired to its shell: its input, its terminal, its stop (an interrupt of the command, not the shell's end). */
  private attachCommand(shell: Shell, session: Session, stdin: 'pipe' | 'null', carried: boolean): void {
    const piped = stdin === 'pipe';
    // Its stdin is the shell's input FIFO: a command blocked reading it is waiting for input (SPEC §7).
    // On a terminal its stdin is the shell's terminal, read as any terminal session's; a command given stdin "null" has none to write to.
    const io = shell.pty ? { stdinId: piped ? shell.terminal.stdinId : undefined, resize: shell.terminal.resize } : { stdinId: piped ? shell.inputPath : undefined, resize: undefined };
    session.attach({ pid: shell.pid, input: piped ? shell.commandInput() : undefined, pty: shell.pty, carried, ...io });
    stopsItself(session, (opts) => shell.interrupt(session, opts));
    this.commandsOf.set(session, shell);
  }

  private onTimeout(session: Session): () => void {
    return () => void stopSession(session, { reason: 'timeout', signal: 'SIGTERM', graceMs: this.ctx.config().tools.exec.killGraceMs });
  }

  /** Why the open shells cannot be handed to a new image now (SPEC §19), in words; undefined when they can. */
  cannotHandOver(): string | undefined {
    const stuck: string[] = [];
    if (this.opening.size > 0) stuck.push(`a shell is being made (${[...this.opening.keys()].map((k) => k.split('\u0000')[1]).join(', ')})`);
    for (const s of this.shells.values()) {
      if (!(s instanceof Shell) || !s.alive) continue;
      const why = !s.ready ? 'it is starting' : cannotHandOver(s.process);
      if (why) stuck.push(`shell "${s.name}" (scope ${s.scope}): ${why}`);
    }
    return stuck.length > 0 ? stuck.join('; ') : undefined;
  }

  /** The persistent shells' own processes: a restart holds, parks and hands them on with the sessions. */
  processes(): Session[] {
    return [...this.shells.values()].filter((s): s is Shell => s instanceof Shell && s.alive).map((s) => s.process);
  }

  /** Whether `session` is a persistent shell's command: handed on with its shell, not on its own. */
  carriesCommand(session: Session): boolean {
    return this.commandsOf.has(session);
  }

  /** Stop reading the shells' end records until the returned resume (a restart's quiet moment). */
  hold(): () => void {
    const resumes = [...this.shells.values()].filter((s): s is Shell => s instanceof Shell && s.alive).map((s) => s.hold());
    return () => {
      for (const resume of resumes) resume();
    };
  }

  /** A review shell as the next image takes it: what it was made as, and its state. */
  private reviewEntry(s: ReviewShell): CarriedShellEntry {
    const base = { name: s.name, scope: s.scope, settings: { ...s.settings, limits: s.settings.limits ?? null }, cwd: s.cwd, commands: s.commands, createdAt: s.createdAt, lastUsedAt: s.lastUsedAt, pending: '' };
    return { shell: { ...base, review: { state: s.state, lost: this.lostState.has(s), ...(s.busy ? { runningId: s.busy.id } : {}) } } };
  }

  /**
   * The review shells, written down whenever one changes (made, a command started or ended,
   * closed): they have no process for the guardian to keep, so after a crash the next daemon
   * takes them back from this file (`reviewShellsLeft`). No review shell, no file.
   */
  private saveReview(): void {
    const entries = [...this.shells.values()].filter((s): s is ReviewShell => s instanceof ReviewShell && s.alive).map((s) => this.reviewEntry(s));
    if (entries.length === 0 && !this.reviewSaved) return;
    const file = reviewShellsFile(this.ctx.state.dir);
    try {
      if (entries.length === 0) rmSync(file, { force: true });
      else {
        writeFileSync(`${file}.new`, JSON.stringify(entries), { mode: 0o600 });
        renameSync(`${file}.new`, file);
      }
      this.reviewSaved = entries.length > 0;
    } catch (err) {
      this.warn('cannot write the review shells down: a crash would lose their state (cd, variables)', err);
    }
  }

  /** Whether the file may hold shells: at start it may (the last run's), so the first save with none removes it. */
  private reviewSaved = true;

  /**
   * At a start that is not a planned restart's (which carries them): the review shells the last
   * run wrote down, taken back when it crashed and `keep` (durability.onCrash "keep"), each
   * command of theirs still running (adopted with the sessions) tracked again. The file is then
   * written anew from what is here (removed when nothing is). Returns the commands' ids.
   */
  takeBackReview(keep: boolean, follow: (s: Session) => void, log: (msg: string, err: unknown) => void): string[] {
    const entries = keep ? reviewShellsLeft(this.ctx.state.dir, log) : [];
    const ids = entries.length > 0 ? this.adopt(entries, follow, log, true) : [];
    this.saveReview();
    return ids;
  }

  /** Every shell as the next image takes it: a persistent one with its process (handed on as any job) and its running command; a review one as its state. */
  carry(): CarriedShellEntry[] {
    const out: CarriedShellEntry[] = [];
    for (const s of this.shells.values()) {
      if (!s.alive) continue;
      if (s instanceof ReviewShell) {
        out.push(this.reviewEntry(s));
        continue;
      }
      const box = s.process;
      const command = s.runningCommand;
      const startTime = box.pid === undefined ? undefined : readStat(box.pid)?.startTime;
      out.push({
        shell: { ...s.carry(), settings: { ...s.settings, limits: s.settings.limits ?? null } },
        box: { session: carrySession(box, startTime), job: handOver(box) },
        ...(command ? { command: carrySession(command, startTime) } : {}),
      });
    }
    return out;
  }

  /**
   * The shells a planned restart handed to this image (SPEC §19), taken back: a persistent one's
   * process adopted as any job's, its FIFOs opened again, its running command back in the
   * registry and followed (`follow`, the exec's follow-up); a review shell's state, and its
   * running command (adopted with the sessions) tracked again. Returns the ids of the commands
   * and of the shells' own processes taken back (their records and cgroups are theirs still). A shell that cannot be taken back is stopped, its command ended with it.
   */
  adopt(entries: readonly CarriedShellEntry[], follow: (s: Session) => void, log: (msg: string, err: unknown) => void, crash = false): string[] {
    const ids: string[] = [];
    const caps = this.ctx.config().tools.exec;
    for (const e of entries) {
      const c = e.shell;
      const key = keyOf(c.scope, c.name);
      if (c.review) {
        const shell = new ReviewShell(c.name, c.scope, c.settings);
        shell.state = c.review.state;
        shell.cwd = c.cwd;
        shell.commands = c.commands;
        shell.createdAt = c.createdAt;
        shell.lastUsedAt = c.lastUsedAt;
        if (c.review.lost) this.lostState.add(shell);
        const running = c.review.runningId ? this.ctx.registry.find(ALL_SCOPES, c.review.runningId) : undefined;
        if (running?.running) {
          void shell.track(running, false).then((lost) => {
            if (lost) this.lostState.add(shell);
            this.saveReview();
          });
        }
        this.shells.set(key, shell);
        this.reviewSaved = true;
        continue;
      }
      if (!e.box) continue;
      let box: Session | undefined;
      try {
        box = resumeSession(e.box.session, this.boxes.events, caps, undefined);
        this.boxes.add(box);
        ids.push(box.id);
        if (e.box.job.channels) adoptChannels(this.ctx, box, e.box.job.channels);
        adoptJob(box, e.box.job, this.ctx.cgroups);
        const made = box;
        void made.finished.then(() => removeDir(made.tmpdir ?? ''));
        const shell = new Shell(c.name, c.scope, c.settings, box);
        let command: Session | undefined;
        if (e.command && c.running) {
          command = resumeSession(e.command, this.ctx.registry.events, caps, this.ctx.state.disk, c.name);
          this.ctx.registry.add(command);
          this.attachCommand(shell, command, command.stdinMode, true);
          this.ctx.keeper.watch(command, { now: true, shell: { box: box.id, timeoutSec: c.running.timeoutSec } });
          ids.push(command.id);
        }
        shell.adopt(c, command, command ? this.onTimeout(command) : () => undefined);
        // What the dead daemon knew of the shell and did not write down is asked of bash (shell.ts).
        if (crash) shell.settleAfterCrash();
        this.guard(shell);
        if (command) {
          follow(command);
          if (e.command?.record.status === 'waiting_input' && e.command.record.interrupt) command.raiseInterrupt(e.command.record.interrupt);
        }
        this.shells.set(key, shell);
      } catch (err) {
        log(`restart: shell "${c.name}" (scope ${c.scope}) could not be taken back; it is stopped`, err);
        this.noteLost(c.scope, c.name, `the daemon was ${crash ? 'restarted after a crash' : 'restarted'} and could not take the shell back (${(err as Error).message}); its state is gone`);
        if (box) void stopSession(box, { reason: 'shutdown', signal: 'SIGKILL', graceMs: 0 });
      }
    }
    return ids;
  }

  /** Make the shell (one at a time per name: two first commands at once make one shell, the second is refused busy). */
  private async open(c: ShellCommand, settings: ShellSettings): Promise<Shell | ReviewShell> {
    const key = keyOf(c.scope, c.params.shell);
    const making = this.opening.get(key);
    if (making) {
      await making.catch(() => undefined);
      throw conflict(`shell "${c.params.shell}" was being made for another command; send this one again once that one has ended`, { shell: c.params.shell });
    }
    const max = this.ctx.config().shells.max;
    const count = [...this.shells.values()].filter((s) => s.scope === c.scope && s.alive).length;
    if (count >= max) {
      throw limit(`scope "${c.scope}" already has ${count} shells (shells.max = ${max}); close one with shell.close {"name": …} (procctl shell close NAME) or reuse one by name`, { shells: count, max });
    }
    // A review shell has no process of its own to start: its state is carried from one command's bash to the next.
    const promise = settings.review ? Promise.resolve(new ReviewShell(c.params.shell, c.scope, settings)) : this.make(c, settings);
    this.opening.set(key, promise);
    try {
      const shell = await promise;
      this.shells.set(key, shell);
      if (shell instanceof ReviewShell) this.saveReview();
      return shell;
    } finally {
      this.opening.delete(key);
    }
  }

  private async make(c: ShellCommand, settings: ShellSettings): Promise<Shell> {
    const p = c.params;
    const boxParams: ExecParams = { command: SHELL_BOOT, workdir: p.workdir, env: p.env, pty: settings.pty, stdin: 'pipe', limits: p.limits, elevated: p.elevated, timeout: 0, name: `shell ${p.shell}` };
    // The shell's own process is not a session anyone lists or records: its own registry, no spool, no record.
    const quiet: Pick<LaunchContext, 'registry' | 'keeper' | 'config'> = {
      registry: this.boxes,
      keeper: { watch: () => undefined } as unknown as RecordKeeper,
      config: () => {
        const config = this.ctx.config();
        return { ...config, tools: { ...config.tools, exec: { ...config.tools.exec, maxLogBytes: 0 } } };
      },
    };
    const launch = Object.assign(Object.create(this.ctx) as LaunchContext, quiet);
    const { session: box } = startJob(launch, { scope: c.scope, params: boxParams, cwd: c.cwd, policy: c.policy, decision: c.decision, approved: { id: `shell${this.ctx.registry.newId()}`, history: [] } });
    void box.finished.then(() => removeDir(box.tmpdir ?? ''));
    const shell = new Shell(p.shell, c.scope, settings, box);
    try {
      await shell.start(START_MS);
    } catch (err) {
      await stopSession(box, { reason: 'user', signal: 'SIGKILL', graceMs: 0 });
      throw unavailable(`shell "${p.shell}" could not be started: ${(err as Error).message}; nothing ran`);
    }
    this.guard(shell);
    return shell;
  }

  /**
   * The shell's own process, protected against the daemon's crash as a session is (SPEC §19): in
   * the guardian's table, and with durability.onCrash "keep" its descriptors and what the shell
   * was made as kept by the guardian, for the next daemon to take the shell back (docs/shells.md).
   */
  private guard(shell: Shell): void {
    this.ctx.keeper.guard?.(shell.process, () => {
      // What the shell was made as; what changes as it runs (cwd, count, the command, a cut) bash tells the next daemon.
      const { running: _running, cut: _cut, settling: _settling, ...made } = shell.carry();
      return { ...made, settings: { ...shell.settings, limits: shell.settings.limits ?? null }, pending: '' };
    });
  }

  /** The shell a command's session runs in, if it is one (SPEC §20). */
  of(session: Session): Shell | undefined {
    return this.commandsOf.get(session);
  }

  /** The command running in the shell whose own process is session `boxId` (a sandboxed shell's channel is that process's). */
  commandIn(boxId: string): Session | undefined {
    for (const shell of this.shells.values()) if (shell instanceof Shell && shell.boxId === boxId) return shell.busy;
    return undefined;
  }

  list(scope: string, all: boolean): ShellView[] {
    return [...this.shells.values()].filter((s) => s.alive && (all || s.scope === scope)).map(view);
  }

  /** Close a shell; a command running in it ends with it. */
  async close(scope: string, name: string): Promise<ShellView | undefined> {
    const shell = this.shells.get(keyOf(scope, name));
    if (!shell) return undefined;
    const seen = view(shell);
    this.forget(shell);
    await shell.close('user', this.ctx.config().tools.exec.killGraceMs);
    return seen;
  }

  /** Every shell, at shutdown. */
  async closeAll(): Promise<void> {
    clearInterval(this.timer);
    const all = [...this.shells.values()];
    this.shells.clear();
    // A stop ends every shell: nothing is left for the next daemon to take back.
    this.saveReview();
    await Promise.all(all.map((s) => s.close('shutdown', 500)));
  }

  /** How many shells are open (a restart names them). */
  get size(): number {
    return [...this.shells.values()].filter((s) => s.alive).length;
  }

  private forget(shell: Shell | ReviewShell): void {
    if (this.shells.get(keyOf(shell.scope, shell.name)) === shell) this.shells.delete(keyOf(shell.scope, shell.name));
    if (shell instanceof ReviewShell) this.saveReview();
  }

  private closeIdle(): void {
    const idleMs = this.ctx.config().shells.idleMs;
    const now = Date.now();
    for (const shell of [...this.shells.values()]) {
      if (!shell.alive) this.forget(shell);
      else if (!shell.busy && now - shell.lastUsedAt >= idleMs) {
        this.forget(shell);
        void shell.close('expired', 500);
      }
    }
  }
}

function view(s: Shell | ReviewShell): ShellView {
  const busy = s.busy;
  return {
    name: s.name,
    scope: s.scope,
    pid: s.pid ?? null,
    cwd: s.cwd,
    state: busy ? 'busy' : 'idle',
    sessionId: busy?.id ?? null,
    commands: s.commands,
    createdAt: new Date(s.createdAt).toISOString(),
    lastUsedAt: new Date(s.lastUsedAt).toISOString(),
    settings: s.settings,
  };
}

/** A command for a shell that ended: the shell's settings where the command names none (elevated is always the command's own, as its approval was). */
function madeAgain(c: ShellCommand, had: ShellSettings): ShellCommand {
  const p = c.params;
  return {
    ...c,
    cwd: p.workdir !== undefined ? c.cwd : had.workdir,
    params: { ...p, env: p.env ?? had.env, pty: p.pty ?? had.pty, limits: p.limits ?? had.limits ?? undefined },
    review: c.review ?? (had.review && p.changes === undefined ? { approval: false } : undefined),
  };
}

function settingsOf(c: ShellCommand): ShellSettings {
  const p = c.params;
  return { workdir: c.cwd, env: p.env ?? {}, pty: p.pty ?? false, elevated: p.elevated ?? false, stdin: p.stdin ?? 'pipe', limits: p.limits ?? null, review: c.review !== undefined };
}

/** Only what the exec names is compared: a command that says nothing of env runs with the shell's. */
function checkSettings(shell: Shell | ReviewShell, p: ExecParams, asked: ShellSettings): void {
  const had = shell.settings;
  const differs: string[] = [];
  if (p.workdir !== undefined && asked.workdir !== had.workdir) differs.push(`workdir ${JSON.stringify(had.workdir)}`);
  if (p.env !== undefined && JSON.stringify(sorted(asked.env)) !== JSON.stringify(sorted(had.env))) differs.push(`env ${JSON.stringify(had.env)}`);
  if (p.pty !== undefined && asked.pty !== had.pty) differs.push(`pty ${had.pty}`);
  if (p.elevated !== undefined && asked.elevated !== had.elevated) differs.push(`elevated ${had.elevated}`);
  if (p.limits !== undefined && JSON.stringify(asked.limits) !== JSON.stringify(had.limits)) differs.push(`limits ${JSON.stringify(had.limits)}`);
  // A command that says nothing of changes runs as its shell's do; one held by the scope's default or a rule cannot run in a direct shell.
  if (asked.review !== had.review && (p.changes !== undefined || asked.review)) differs.push(had.review ? 'review mode (changes "review")' : 'direct changes (changes "direct")');
  if (differs.length > 0) {
    throw conflict(
      `shell "${shell.name}" was made with ${differs.join(', ')}; send the command without those settings (or with the shell's), use another shell name, or close this one (shell.close) first`,
      { shell: shell.name, settings: had },
    );
  }
}

function sorted(o: Record<string, string>): [string, string][] {
  return Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Where the review shells are written down (`Shells.saveReview`), in the state directory. */
function reviewShellsFile(stateDir: string): string {
  return join(stateDir, 'review-shells.json');
}

/**
 * The review shells a daemon that died without a goodbye had (SPEC §20), to take back after a
 * crash: none when it stopped (a stop removes the file) or wrote none. An unreadable file is
 * said by `warn` and taken as none.
 */
function reviewShellsLeft(stateDir: string, warn: (msg: string, err: unknown) => void): CarriedShellEntry[] {
  let text: string;
  try {
    text = readFileSync(reviewShellsFile(stateDir), 'utf8');
  } catch {
    return [];
  }
  try {
    const entries = JSON.parse(text) as CarriedShellEntry[];
    if (!Array.isArray(entries)) throw new Error('not a list of shells');
    return entries.filter((e) => e?.shell?.review !== undefined);
  } catch (err) {
    warn(`${reviewShellsFile(stateDir)} cannot be read; the review shells of the last run are not taken back`, err);
    return [];
  }
}

