import { conflict, unavailable } from '../../base/errors.js';
import { continueSession, pauseSession } from '../../runner/cgroup.js';
import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { sessionRecord } from '../render.js';
import { target } from './target.js';

/** A session that can be paused or continued: running, and in a cgroup the host can freeze. */
function pausable(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  if (!s.running) throw conflict(`session ${s.id} is not running (${s.status}); there is nothing to ${p.action}`);
  if (d.cgroups.freeze === null) {
    throw unavailable(`process ${p.action} freezes the session's cgroup, and sessions here have none that can be frozen (cgroups: ${d.cgroups.mode}; ${d.cgroups.reason}); see docs/resources.md`);
  }
  return s;
}

/** Freeze every process of the session (SPEC §15): its timeout and waiting-for-input detection wait too. */
export async function pauseAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = pausable(d, ctx, p);
  const problem = await pauseSession(s);
  if (problem) throw unavailable(`session ${s.id} could not be paused: ${problem}`);
  const more = ctx.voice.call({ action: 'continue', sessionId: s.id });
  return { ...sessionRecord(s), text: `Session ${s.id} is paused: every process of it is frozen. ${more} lets it run on; kill still stops it.` };
}

export function continueAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = pausable(d, ctx, p);
  const problem = continueSession(s);
  if (problem) throw unavailable(`session ${s.id} could not be continued: ${problem}`);
  return { ...sessionRecord(s), text: `Session ${s.id} runs on.` };
}
