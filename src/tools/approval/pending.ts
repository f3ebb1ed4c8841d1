import { randomBytes } from 'node:crypto';
import { interruptView } from '../../interrupt/watcher.js';
import type { ExecParams } from '../../schema/exec.js';
import type { Interrupt, InterruptOutcome, PendingExec, Session, SessionDecision } from '../../session/session.js';
import type { DenyReason } from '../../session/types.js';
import type { Daemon } from '../context.js';
import { endLine } from '../render.js';
import { disarm, expireAt } from './expiry.js';
import { noteEnded } from '../trail.js';

/** How much of the command an approval's label quotes. */
const LABEL_COMMAND_CHARS = 500;

/**
 * An approved exec: the session it starts takes the id of the one that waited, and its approval
 * history, so the id the caller was given stays the id of the command.
 */
export interface ApprovedExec {
  id: string;
  history: InterruptOutcome[];
  /** A part of it said review (the part, in words): it runs in review mode and its changes wait for a person. */
  review?: string;
  /** How the rules judged it when it asked. */
  decision?: SessionDecision;
}

/** Pending approvals whose `confirm: true` is being carried out: a second answer is a conflict. */
const answering = new WeakSet<Session>();

/**
 * Make `s` wait for a person's approval (SPEC §8): it is listed as `approval_required` with an
 * approval interrupt, its record (with what it will run) is on disk before anyone is told, an
 * `approval_required` event goes out, and it is denied if nobody answers by
 * `approvals.timeoutSeconds`. Also for other policies that ask before a command runs.
 */
export function askApproval(d: Daemon, s: Session, p: ExecParams, reason: string, rule?: number, review?: string): void {
  const now = Date.now();
  const interrupt: Interrupt = {
    id: `apr_${randomBytes(6).toString('hex')}`,
    kind: 'approval',
    reason,
    fields: [{ name: 'confirm', type: 'confirm', label: approvalLabel(p.command), required: true }],
    createdAt: now,
    expiresAt: now + d.config().approvals.timeoutSeconds * 1000,
  };
  // What starts later is exactly this exec, in the directory it was checked in, never the rules again.
  const pending: PendingExec = { params: p, cwd: s.cwd, ...(rule === undefined ? {} : { rule }), ...(review === undefined ? {} : { review }) };
  s.awaitApproval(interrupt, pending);
  d.registry.add(s);
  d.keeper.hold(s);
  expireAt(s, s.interrupt!.expiresAt, () => expire(d, s));
  s.emit('approval_required', { interrupt: interruptView(interrupt), name: s.name, command: s.command, cwd: s.cwd });
  d.log.info({ sessionId: s.id, scope: s.scope, rule, expiresAt: new Date(interrupt.expiresAt).toISOString() }, 'exec waits for approval');
}

function approvalLabel(command: string): string {
  const shown = command.length > LABEL_COMMAND_CHARS ? `${command.slice(0, LABEL_COMMAND_CHARS)}…` : command;
  return `Run this command? ${shown}`;
}

/** A session restored from the state directory still waiting for its approval: its expiry counts on from when it was asked. */
export function restorePending(d: Daemon, s: Session): void {
  expireAt(s, s.interrupt!.expiresAt, () => expire(d, s));
}

function expire(d: Daemon, s: Session): void {
  if (!s.awaitingApproval || d.registry.find(s.scope, s.id) !== s) return;
  // Shutting down: it stays pending, and the next start expires it (the time counts from when it was asked).
  if (d.closing) return;
  // Being started: the answer came in time. Should the start fail, finishAnswer looks again.
  if (answering.has(s)) return;
  endUnstarted(d, s, 'expired', 'expired');
}

/**
 * End a session that never started (SPEC §8): denied, its pending approval (if any) settled with
 * `outcome`; its record says why and subscribers get an `exited` event.
 */
export function endUnstarted(d: Daemon, s: Session, reason: DenyReason, outcome?: InterruptOutcome['outcome'], why?: string): void {
  disarm(s);
  s.deny(reason, why ?? s.interrupt?.reason ?? 'no reason given', outcome);
  s.emit('exited', { status: s.status, exitCode: null, signal: null, reason: s.reason, text: endLine(s) });
  noteEnded(d, s);
  d.log.info({ sessionId: s.id, scope: s.scope, reason }, 'exec denied; nothing ran');
}

/** Start carrying out an approval; false when one is already under way. */
export function beginAnswer(s: Session): boolean {
  if (answering.has(s)) return false;
  answering.add(s);
  return true;
}

/**
 * The approval was carried out (`started`: the command runs under the same id) or failed (it
 * is still pending, and expires at once if its time ran out meanwhile).
 */
export function finishAnswer(d: Daemon, s: Session, started: boolean): void {
  answering.delete(s);
  if (started) {
    disarm(s);
    return;
  }
  if (s.awaitingApproval && Date.now() >= s.interrupt!.expiresAt) expire(d, s);
}

/** Being started after its approval, right now. */
export function isAnswering(s: Session): boolean {
  return answering.has(s);
}
