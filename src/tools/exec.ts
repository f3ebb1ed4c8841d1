import { reviewed } from './review.js';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { YIELD_MS_RANGE } from '../config/schema.js';
import { conflict, forbidden, invalid, restarting, unavailable } from '../base/errors.js';
import { checkEnvOverrides } from '../runner/env.js';
import { daemonInheritance } from '../policy/env.js';
import { ALL_SCOPES, scopeRules } from '../policy/scopes.js';
import { startJob } from '../runner/start.js';
import { heldCheck } from '../sandbox/host.js';
import type { ShellCommand } from '../shells/shells.js';
import { askPortsNow } from '../runner/ports.js';
import { stopSession } from '../runner/stop.js';
import { ExecParamsSchema, MAX_NAME_CHARS, MAX_TIMEOUT_SEC, type ExecParams } from '../schema/exec.js';
import { parseParams } from '../schema/parse.js';
import type { Cancellation } from '../base/cancellation.js';
import type { Session } from '../session/session.js';
import { noteFollow, type ExecFollow } from '../session/carry.js';
import { patternError } from '../config/pattern.js';
import { matchCounts, notifyMatches } from '../readiness/notify.js';
import { watchReadiness } from '../readiness/watch.js';
import { gateExec } from './approval/gate.js';
import { decidedBy, decisionOf, judgeCommand, judgeReady } from './approval/judge.js';
import { afterSettled } from './approval/changes.js';
import type { ApprovedExec } from './approval/pending.js';
import type { CallContext, Daemon } from './context.js';
import { endLine, execResult, exitSummary, type Yielded } from './render.js';
import type { Voice } from '../schema/voice.js';
import { noteEnded, noteExecRequest, noteStarted } from './trail.js';

/** The longest a timer waits (2^31-1 ms, about 24 days): "until it ends". */
const FOREVER_MS = 2 ** 31 - 1;
const clampYield = (ms: number) => Math.min(YIELD_MS_RANGE[1], Math.max(YIELD_MS_RANGE[0], ms));

function checkWorkdir(dir: string | undefined, v: Voice): string {
  const cwd = resolve(dir ?? process.cwd());
  let ok = false;
  try {
    ok = statSync(cwd).isDirectory();
  } catch {
    // reported below
  }
  if (!ok) throw invalid(`${v.execOption('workdir', dir ?? '')} is not an existing directory; pass an absolute path to a directory that exists`, { path: ['workdir'] });
  return cwd;
}

/** With `key`: what to do about a running session of the same key (SPEC §5). */
async function settleKey(d: Daemon, ctx: CallContext, p: ExecParams): Promise<Session | undefined> {
  if (!p.key) return undefined;
  const current = d.registry.running(ctx.scope).find((s) => s.key === p.key);
  if (!current) return undefined;
  const mode = p.ifRunning ?? 'replace';
  if (mode === 'keep') return current;
  if (mode === 'reject') {
    const v = ctx.voice;
    throw conflict(`key "${p.key}" already has a running session ${current.id} (${current.name}); wait for it, kill it, or pass ${v.execOption('ifRunning', 'replace')}`, {
      sessionId: current.id,
    });
  }
  await stopSession(current, { reason: 'replaced', signal: 'SIGTERM', graceMs: d.config().tools.exec.killGraceMs });
  return undefined;
}

/**
 * The exec tool: start a command, wait up to the yield, answer with its result or `running`.
 * `approved`: an approval starts the exec it was asked for (SPEC §8), and the rules are not asked again.
 */
export async function execTool(d: Daemon, ctx: CallContext, raw: unknown, approved?: ApprovedExec) {
  const t0 = process.hrtime.bigint();
  try {
    return await runExec(d, ctx, raw, approved);
  } finally {
    noteExecRequest(d, ctx.scope, t0);
  }
}

/**
 * The params of the usual exec (a command, and any of workdir, yieldMs, background, timeout, pty,
 * stdin, name, key and elevated), checked with the schema's own rules without zod's parse: the
 * parse took ~23 µs of an exec warm and ~0.7 ms after a pause, on the way to the spawn
 * (docs/benchmarks.md). Anything else, valid or not, goes through the schema, which says what is
 * wrong. What passes here is what the schema would give, a copy as the schema's is
 * (test/unit/tools/exec-params.test.ts).
 */
export function quickExecParams(raw: unknown): ExecParams | undefined {
  if (typeof raw !== 'object' || raw === null || Object.getPrototypeOf(raw) !== Object.prototype) return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r.command !== 'string' || r.command.length === 0) return undefined;
  for (const k in r) {
    const v = r[k];
    switch (k) {
      case 'command':
        break;
      case 'workdir':
      case 'key':
        if (typeof v !== 'string' || v.length === 0) return undefined;
        break;
      case 'name':
        if (typeof v !== 'string' || v.length === 0 || v.length > MAX_NAME_CHARS) return undefined;
        break;
      case 'yieldMs':
        if (typeof v !== 'number' || !Number.isFinite(v)) return undefined;
        break;
      case 'timeout':
        if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MAX_TIMEOUT_SEC) return undefined;
        break;
      case 'background':
      case 'pty':
      case 'elevated':
        if (typeof v !== 'boolean') return undefined;
        break;
      case 'stdin':
        if (v !== 'pipe' && v !== 'null') return undefined;
        break;
      default:
        return undefined;
    }
  }
  return { ...r } as ExecParams;
}

function refuseWhileClosing(d: Daemon): void {
  if (d.restarting) throw restarting('the daemon is handing its sessions to a new image and starts no command this moment; nothing ran: retry in a second');
  if (d.closing) throw unavailable('the daemon is shutting down and starts no new commands; retry once it is back');
}

async function runExec(d: Daemon, ctx: CallContext, raw: unknown, approved?: ApprovedExec) {
  const p = quickExecParams(raw) ?? parseParams(ExecParamsSchema, raw, 'exec');
  const cfg = d.config().tools.exec;
  refuseWhileClosing(d);
  if (ctx.scope === ALL_SCOPES) throw invalid('exec runs a command in one scope: pass that scope\'s name (and its token), not "*"', { path: ['scope'] });
  const policy = scopeRules(d.config()).policy(ctx.scope);
  // "ask" goes through an approval (gateExec); an approved exec was decided when it was asked.
  if (p.elevated && policy.elevated === 'deny' && !approved) {
    throw forbidden(
      `elevated mode is denied for scope "${ctx.scope}"; run the command without elevated, or an operator can set scopes.${ctx.scope}.elevated to "ask" or "allow" in the config`,
      { path: ['elevated'] },
    );
  }
  const cwd = checkWorkdir(p.workdir, ctx.voice);
  // Judged once, before anything runs; an approved exec was judged when it was asked.
  const parsing = approved ? undefined : judgeReady(d.config().approvals);
  if (parsing) await parsing;
  const judgement = approved ? undefined : judgeCommand(d.config().approvals, p.command, ctx.scope, d.remembered.list());
  // A rule's "review" makes it a review exec whatever the params say; a deny wins over review's refusals.
  const byRule = approved ? approved.review : judgement?.review && decidedBy(judgement.review);
  const asked = judgement?.decision === 'deny' ? false : reviewed(d, ctx.scope, p, byRule);
  const review = typeof asked === 'boolean' ? asked : await asked;
  if (p.env) checkEnvOverrides(p.env);
  checkPatterns(p);
  checkQuiet(p);
  const gated = approved ? undefined : gateExec(d, ctx, p, cwd, policy, judgement);
  if (gated) return gated;

  const start = async () => {
    // Each waited for only where it has something to wait for: no turn of promises on a plain exec's way.
    const kept = p.key ? await settleKey(d, ctx, p) : undefined;
    // Its overlay may be being mounted ahead (runner/premount.ts): taken once made.
    if (review && !kept) await d.ahead?.settled();
    // The sandbox's check of the host as it is now, made again off the loop if the host changed: the launch finds it held.
    const held = kept ? undefined : heldCheck(d.config());
    if (held instanceof Promise) await held;
    if (ctx.cancellation.aborted) throw unavailable('the request was cancelled before the command started; nothing ran');
    refuseWhileClosing(d);
    if (kept) return { kept };
    const inherited = daemonInheritance(d.config().env).env;
    const decision = approved ? approved.decision : judgement && decisionOf(judgement);
    const policyOf = { inherited, elevated: p.elevated ?? false };
    const started = p.shell
      ? await inShell(d, { scope: ctx.scope, params: { ...p, shell: p.shell }, cwd, policy: policyOf, decision, id: approved?.id, review: review ? { approval: byRule !== undefined } : undefined })
      : startJob(d, { scope: ctx.scope, params: p, cwd, policy: policyOf, approved, review: review ? { approval: byRule !== undefined } : undefined, decision });
    // An approved exec was told of when it was asked for; its answer is on record.
    if (!approved) noteStarted(d, ctx, started.session, p, { review, judgement });
    followSession(d, started.session, { waitFor: p.waitFor, notify: p.notify });
    return { started };
  };
  const { kept, started } = p.key ? await d.registry.withKeyLock(ctx.scope, p.key, start) : await start();
  if (kept) return execResult(kept, [], ctx.voice);
  const { session, warnings } = started!;
  const shellOf = (started as { shell?: { view(): Record<string, unknown> } }).shell;

  // A scope without background sessions waits for the end (or its timeout, or a question).
  const foreground = !policy.background;
  let yielded: Yielded | undefined;
  if (!p.background || foreground) {
    const yieldMs = foreground ? FOREVER_MS : clampYield(p.yieldMs ?? cfg.backgroundMs);
    // A scope without background sessions waits for the end: quiet does not end that wait either.
    const quietMs = foreground ? undefined : p.yieldOnQuietMs;
    const outcome = await waitForEnd(d, session, yieldMs, ctx.cancellation, quietMs);
    if (outcome === 'cancelled') {
      await stopSession(session, { reason: 'cancelled', signal: 'SIGTERM', graceMs: cfg.killGraceMs });
    }
    // A review's changes are read off the daemon's thread first; any other session's answer is made in this turn.
    if (!session.running) return afterSettled(d, session, (s) => answer(execResult(s, warnings, ctx.voice)));
    yielded = outcome === 'quiet' ? { by: 'quiet', quietMs } : outcome === 'yield' ? { by: 'time' } : undefined;
  }
  // Here in a foreground-only scope only when the command waits for an answer (or was cancelled).
  // Whoever holds this answer may rely on the session surviving a daemon restart as a record.
  session.markBackgrounded();
  // An answer after a wait says where a server listens (SPEC §20); one at once (background) has had no time to.
  if (!p.background) askPortsNow(session);
  return answer(execResult(session, warnings, ctx.voice, yielded));

  function answer<R extends { text: string }>(r: R): R {
    const shown = shellOf ? { ...r, shell: shellOf.view() } : r;
    return foreground ? { ...shown, text: `Warning: background sessions are disabled for scope "${ctx.scope}"; ran in the foreground.\n${r.text}` } : shown;
  }
}


/** A command for a persistent shell (SPEC §20), a review shell's too. */
async function inShell(d: Daemon, c: ShellCommand) {
  const { session, warnings, shell, restarted, why } = await d.shells.run(c);
  return { session, warnings, shell: { view: () => ({ name: shell.name, cwd: shell.cwd, ...(restarted ? { restarted: true } : {}), ...(why ? { reason: why } : {}) }) } };
}

/** RE2 patterns in the params compile, or the call is refused naming the field and the engine's reason. */
function checkPatterns(p: ExecParams): void {
  const check = (source: string, path: string[]) => {
    const problem = patternError(source);
    if (problem) throw invalid(`${path.join('.')} is not a valid RE2 pattern: ${problem}; RE2 has no lookaround or backreferences`, { path });
  };
  if (p.waitFor && 'output' in p.waitFor) check(p.waitFor.output, ['waitFor', 'output']);
  if (p.notify && typeof p.notify === 'object') check(p.notify.match, ['notify', 'match']);
}

/** yieldOnQuietMs ends a wait; background has none. */
function checkQuiet(p: ExecParams): void {
  if (p.yieldOnQuietMs !== undefined && p.background) {
    throw invalid('yieldOnQuietMs waits until the command goes quiet, but background:true returns at once: pass one of them', { path: ['yieldOnQuietMs'] });
  }
}

/**
 * What follows a started session besides its process: its end settled, put on record and
 * announced, and what its exec asked to be told of (readiness, matches). A session a restart
 * handed over is followed again the same way (SPEC §19).
 */
export function followSession(d: Daemon, session: Session, follow: ExecFollow): void {
  noteFollow(session, follow);
  // A review session's changes are settled (pending, or nothing held) before its end is announced.
  // A review's tree is read off this thread first; any other session goes on in this turn.
  void session.finished.then(() =>
    afterSettled(d, session, () => {
      // The trail's end (with the figures read from the session's cgroup) once the promises of this
      // turn are through: the exec that waits for this end has answered by then (docs/benchmarks.md,
      // the exec round trip), and before any other request is read.
      process.nextTick(() => noteEnded(d, session));
      announceExit(d, session);
    }),
  );
  if (follow.waitFor && session.readiness?.readyAt === undefined) watchReadiness(session, follow.waitFor, session.cwd);
  if (follow.notify && typeof follow.notify === 'object') notifyMatches(session, follow.notify.match);
}

/**
 * Wait until the session ends, asks for input, is ready (its waitFor held), the yield passes, it
 * printed nothing for `quietMs` (yieldOnQuietMs, from its start or its last output), or the
 * request is cancelled. A restart ends the wait early: the answer is this image's, `running`.
 */
async function waitForEnd(d: Daemon, session: Session, ms: number, signal: Cancellation, quietMs?: number): Promise<'ended' | 'interrupt' | 'ready' | 'yield' | 'quiet' | 'restart' | 'cancelled'> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (!session.running) return 'ended';
    if (session.interrupt) return 'interrupt';
    if (session.readiness?.readyAt !== undefined) return 'ready';
    if (signal.aborted) return 'cancelled';
    if (d.restarting) return 'restart';
    const now = Date.now();
    const left = deadline - now;
    if (left <= 0) return 'yield';
    // Quiet is looked at when it would be over, not per chunk: output only moves its end later.
    const quietLeft = quietMs === undefined ? Infinity : (session.output.lastOutputAt ?? session.startedAt) + quietMs - now;
    if (quietLeft <= 0) return 'quiet';
    // Output does not end the wait: no wake-up per chunk of it.
    await session.waitForChange(Math.min(left, quietLeft), signal, false);
  }
}

/** The `exited` event; a backgrounded session's carries the one-line summary (notifyOnExit). */
function announceExit(d: Daemon, s: Session): void {
  if (!d.registry.events.listening) return;
  const cfg = d.config().tools.exec;
  const fields: Record<string, unknown> = { status: s.status, exitCode: s.exitCode, signal: s.signal, reason: s.reason ?? null };
  const success = s.status === 'completed' && s.exitCode === 0;
  const silentSuccess = success && s.output.totalChars === 0;
  const wanted = s.notify === 'never' ? false : s.notify === 'failure' ? !success : !silentSuccess || cfg.notifyOnExitEmptySuccess;
  if (s.backgrounded && cfg.notifyOnExit && wanted) fields.summary = exitSummary(s);
  const matches = matchCounts(s);
  if (matches) fields.matches = matches;
  fields.text = endLine(s);
  s.emit('exited', fields);
}
