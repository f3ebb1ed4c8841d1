import type { RootChange } from '../../changes/held.js';
import type { PathWhy } from '../../changes/types.js';
import { shown } from '../../changes/paths.js';
import { conflict } from '../../base/errors.js';
import type { ProcessParams } from '../../schema/process.js';
import type { Session } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';
import { target } from './target.js';
import { statLine, totalsLine } from '../stat.js';
import { afterDecision, changesAnswer, checkApplier } from '../approval/changes.js';
import { noteAnswer, noteChanges } from '../trail.js';

/**
 * process changes, apply, discard and undo (SPEC §16): thin over changes/held.ts, which reads,
 * plans and writes. The text says what happened and what the person or model can do next.
 */

/** The review session this action is about, its job ended (a running one has nothing settled to act on). */
function reviewed(d: Daemon, ctx: CallContext, p: ProcessParams): Session {
  const s = target(d, ctx, p);
  if (!s.changes) {
    throw conflict(`session ${s.id} was not run with changes "review": what it wrote went straight into the workspace, and there is nothing held to ${p.action}`, { sessionId: s.id });
  }
  return s;
}

export async function changesAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = reviewed(d, ctx, p);
  const v = ctx.voice;
  // A running job can still reshape its changes (a directory swapped for a symlink between a listing and a read): read once it is over.
  if (s.running) {
    throw conflict(`session ${s.id} is still running: its changes are shown once it has ended (${v.call({ action: 'wait', sessionIds: [s.id] })} waits for it)`, { sessionId: s.id, state: 'running' });
  }
  const a = await d.held.changes(s.id, { paths: p.paths, stat: p.stat, offset: p.offset, limit: p.limit });
  const t = a.totals;
  const head = `Session ${s.id} (${a.state}) changed ${totalsLine(t, a.workspace)}.`;
  const lines = [head, ...a.files.map(statLine), ...rootLine(a.root)];
  if (a.diff) lines.push('', a.diff.text, ...(a.diff.hint ? [a.diff.hint] : []));
  if (s.running) lines.push(`It is still running; what it writes until it ends is held too.`);
  else if (a.state === 'pending' && t.files > 0) {
    lines.push(`Nothing of this is in the workspace yet. Apply it with ${v.call({ action: 'apply', sessionId: s.id })} (some paths: add paths), or drop it with ${v.call({ action: 'discard', sessionId: s.id })}.`);
  }
  return { sessionId: s.id, status: s.status, state: a.state, workspace: a.workspace, files: a.files, totals: t, ...(a.root ? { root: a.root } : {}), ...(a.diff ? { diff: a.diff.text, diffLines: a.diff.totalLines } : {}), text: lines.join('\n') };
}

/** The workspace root's own mode, which the session changed and apply does not carry: said, never dropped unseen. */
function rootLine(root: RootChange | undefined): string[] {
  if (!root) return [];
  const octal = (m: number) => `0${m.toString(8)}`;
  return [`It also changed the mode of the workspace root itself from ${octal(root.oldMode)} to ${octal(root.mode)}; apply does not carry that (it writes the paths under the root): chmod the workspace yourself if you want it.`];
}

const listed = (title: string, rows: readonly PathWhy[]) => (rows.length === 0 ? [] : [`${title}:`, ...rows.map((r) => `  ${shown(r.path)}: ${r.why}`)]);

export async function applyAction(d: Daemon, ctx: CallContext, p: ProcessParams, answered = false) {
  const s = reviewed(d, ctx, p);
  // Changes a rule held for a person are applied by a person (SPEC §16), whether they answer the question or not.
  checkApplier(d, ctx, s);
  const r = await d.held.apply(s.id, { paths: p.paths, force: p.force });
  noteChanges(d, s, 'applied', { files: r.applied.length, conflicts: r.conflicts.length, refused: r.refused.length, failed: r.failed.length });
  afterDecision(d, ctx, s, answered);
  const v = ctx.voice;
  const lines = [
    `Applied ${r.applied.length} change${r.applied.length === 1 ? '' : 's'} of session ${s.id} to ${r.workspace}.`,
    ...listed('Conflicts, left as the workspace has them (changed there since the session wrote them; force overwrites)', r.conflicts),
    ...listed('Refused (never written)', r.refused),
    ...listed('Failed', r.failed),
    ...rootLine(r.root),
    `${v.call({ action: 'undo', sessionId: s.id })} puts back what this replaced.`,
  ];
  return { sessionId: s.id, status: s.status, state: r.state, workspace: r.workspace, applied: r.applied, conflicts: r.conflicts, refused: r.refused, failed: r.failed, ...(r.root ? { root: r.root } : {}), text: lines.join('\n') };
}

export async function discardAction(d: Daemon, ctx: CallContext, p: ProcessParams, answered = false) {
  const s = reviewed(d, ctx, p);
  // Dropping them needs no person: nothing reaches the workspace.
  const r = await d.held.discard(s.id);
  noteChanges(d, s, 'discarded', { files: r.files });
  afterDecision(d, ctx, s, answered);
  return { sessionId: s.id, status: s.status, state: r.state, text: `Discarded the changes of session ${s.id}: ${r.workspace} is as it was.` };
}

export async function undoAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = reviewed(d, ctx, p);
  const r = await d.held.undo(s.id);
  noteChanges(d, s, 'undone', { files: r.restored.length, conflicts: r.conflicts.length });
  s.noteChanges(d.held.summary(s.id));
  const lines = [`Undid the apply of session ${s.id}: ${r.restored.length} path${r.restored.length === 1 ? '' : 's'} of ${r.workspace} back as they were.`, ...listed('Conflicts, left alone (changed since the apply)', r.conflicts)];
  return { sessionId: s.id, status: s.status, state: r.state, restored: r.restored, conflicts: r.conflicts, text: lines.join('\n') };
}

/** `resume` of a changes approval (SPEC §16): a person's yes applies them all, a no discards them, answered as apply or discard. */
export async function resumeChanges(d: Daemon, ctx: CallContext, p: ProcessParams, s: Session) {
  const { confirm, interruptId, done } = changesAnswer(d, ctx, p, s);
  try {
    noteAnswer(d, ctx, s, 'changes', confirm);
    const act = { action: confirm ? 'apply' : 'discard', sessionId: s.id } as const;
    const r = confirm ? await applyAction(d, ctx, act, true) : await discardAction(d, ctx, act, true);
    return { ...r, interruptId };
  } finally {
    done();
  }
}
