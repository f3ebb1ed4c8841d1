import { conflict, unavailable } from '../../base/errors.js';
import { continueSession, pauseSession } from '../../runner/cgroup.js';
import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { sessionRecord } from '../render.js';
import { target } from './target.js';

/** A session that can be paused or continued: running, and in a cgroup the host can freeze (or a shell's command, SPEC §20). */
function pausable(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  if (!s.running) throw conflict(`session ${s.id} is not running (${s.status}); there is nothing to ${p.action}`);
  if (d.cgroups.freeze === null && !d.shells.of(s)) {
    throw unavailable(`process ${p.action} freezes the session's cgroup, and sessions here have none that can be frozen (cgroups: ${d.cgroups.mode}; ${d.cgroups.reason}); see docs/resources.md`);
  }
  return s;
}

/** Freeze every process of the session (SPEC §15): its timeout and waiting-for-input detection wait too. */
export async function pauseAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = pausable(d, ctx, p);
  // A shell's command is not a cgroup of its own: its processes are stopped, the shell and its other jobs run on.
  const shell = d.shells.of(s);
  const problem = shell ? await shell.pauseCommand(s) : await pauseSession(s);
  if (problem) throw unavailable(`session ${s.id} could not be paused: ${problem}`);
  const more = ctx.voice.call({ action: 'continue', sessionId: s.id });
  return { ...sessionRecord(s), text: `Session ${s.id} is paused: every process of it is frozen. ${more} lets it run on; kill still stops it.` };
}

export function continueAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = pausable(d, ctx, p);
  const shell = d.shells.of(s);
  const problem = shell ? shell.continueCommand(s) : continueSession(s);
  if (problem) throw unavailable(`session ${s.id} could not be continued: ${problem}`);
  return { ...sessionRecord(s), text: `Session ${s.id} runs on.` };
}
