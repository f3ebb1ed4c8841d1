import { conflict, notFound, ProcctlError } from '../../base/errors.js';
import type { ProcessParams } from '../../schema/process.js';
import { cliVoice } from '../../schema/voice.js';
import { ALL_SCOPES } from '../../session/registry.js';
import type { Session } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';
import { sessionRecord } from '../render.js';
import { afterSettled } from '../approval/changes.js';
import { target } from './target.js';
import { stopAndRecord } from './kill.js';

/**
 * Forget a finished session: its record and spool (first, all or nothing: if the record cannot be
 * deleted this throws `unavailable` and the session stays), then what it holds in memory and its
 * scratch directory.
 */
export function forget(d: Daemon, s: Session): void {
  d.state.remove(s.id);
  if (s.changes) {
    try {
      d.held.remove(s.id);
    } catch (err) {
      // What a job left in its changes (a directory it shut) never keeps its session from being forgotten.
      d.log.warn({ sessionId: s.id, err: (err as Error).message }, 'could not remove all of a forgotten review session\'s changes');
    }
  }
  s.recordWith(undefined); // a forgotten session writes no record again
  s.spool?.remove();
  d.registry.delete(s.id);
  d.scratch.release(s.tmpdir);
}

/**
 * A review session's pending changes are not dropped by forgetting it, unless the caller says so
 * (SPEC §16). `done`: what this request did to it already (a stop), said first.
 */
function keepsChanges(d: Daemon, s: Session, ctx: CallContext, p: ProcessParams, done?: string): void {
  if (!s.changes?.pending || p.discard) return;
  const v = ctx.voice;
  // Where a rule holds them for a person, only a person applies them (SPEC §16): said as such.
  const apply = d.held.needsApproval(s.id)
    ? `a person applies them (${cliVoice(s.scope).call({ action: 'resume', sessionId: s.id, input: { confirm: true } })})`
    : `apply them (${v.call({ action: 'apply', sessionId: s.id })})`;
  throw conflict(
    `${done ? `${done} It stays listed: ` : ''}session ${s.id} holds ${s.changes.files} changed path${s.changes.files === 1 ? '' : 's'} not applied yet; ${apply}, or drop them with it (${v.call({ action: p.action === 'clear' ? 'clear' : 'remove', sessionId: s.id, discard: true })})`,
    { sessionId: s.id, changes: s.changes, ...(done ? { stopped: true } : {}) },
  );
}

// A review session that ended a moment ago may still be settling (Session.settling): what it holds
// is known once that is done, and only then may it be forgotten, or its changes would go unasked.
export function clearAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  return afterSettled(d, s, () => clearSettled(d, s, ctx, p));
}

function clearSettled(d: Daemon, s: Session, ctx: CallContext, p: ProcessParams) {
  keepsChanges(d, s, ctx, p);
  if (s.running) {
    const v = ctx.voice;
    throw notFound(
      `session ${s.id} is still running, and clear forgets only finished sessions; kill it first (${v.call({ action: 'kill', sessionId: s.id })}), or remove it (${v.call({ action: 'remove', sessionId: s.id })})`,
      { sessionId: s.id, running: true },
    );
  }
  forget(d, s);
  return { ...sessionRecord(s), text: `Forgot session ${s.id}.` };
}

export async function removeAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  await afterSettled(d, s, () => undefined);
  keepsChanges(d, s, ctx, p);
  const wasRunning = s.running;
  const stopped = await stopAndRecord(d, s, p, ctx.voice);
  // Forgotten while this waited (a clear or a remove with discard sent meanwhile): nothing more to do.
  if (d.registry.find(ALL_SCOPES, s.id) !== s) return { ...stopped, text: `${stopped.text} It was forgotten meanwhile.` };
  // A review session that was running tells what it wrote only now, once stopped (and its changes
  // settled, which stopAndRecord waits for): held like any pending changes, never dropped unasked.
  keepsChanges(d, s, ctx, p, wasRunning ? stopped.text : undefined);
  return forgetAfter(d, s, stopped);
}

/**
 * Forget `s` once something was done to it (stopped, its approval withdrawn): the answer says
 * both, or, when it cannot be forgotten, what was done and then why it is still listed.
 */
export function forgetAfter<R extends { text: string }>(d: Daemon, s: Session, record: R): R {
  try {
    forget(d, s);
  } catch (err) {
    if (err instanceof ProcctlError) throw new ProcctlError(err.kind, `${record.text} But ${err.message}`, err.details);
    throw err;
  }
  return { ...record, text: `${record.text} Forgot session ${s.id}.` };
}
