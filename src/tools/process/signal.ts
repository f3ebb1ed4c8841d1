import { conflict, invalid } from '../../base/errors.js';
import { signalGroup } from '../../runner/group.js';
import { normalizeSignal, type ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { target } from './target.js';

/**
 * Deliver one signal to the session's whole group, as a terminal would for Ctrl-C: no stop
 * file, no grace, no SIGKILL. What the job does with it is up to the job.
 */
export function signalAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  if (!p.signal) throw invalid('process signal needs signal, e.g. "SIGINT"', { path: ['signal'], schema: true });
  if (!s.running || s.pid === undefined) throw conflict(`session ${s.id} has ended (${s.status}); there is nothing to signal`);
  const signal = normalizeSignal(p.signal);
  // A shell's command (SPEC §20) shares the shell's group: only its own processes get the signal.
  const shell = d.shells.of(s);
  if (shell) {
    const sent = shell.signalCommand(s, signal);
    const to = sent.to === 'shell' ? `shell "${shell.name}", which runs it (a builtin)` : `the ${sent.count} process${sent.count === 1 ? '' : 'es'} of its command in shell "${shell.name}"`;
    return { status: s.status, sessionId: s.id, signal, text: `Sent ${signal} to ${to} (session ${s.id}).` };
  }
  signalGroup(s.pid, signal);
  return { status: s.status, sessionId: s.id, signal, text: `Sent ${signal} to the process group of session ${s.id}.` };
}
