import { ProcessParamsSchema, type ProcessAction, type ProcessParams } from '../../schema/process.js';
import { parseParams } from '../../schema/parse.js';
import { unstartedAction } from '../approval/answer.js';
import type { CallContext, Daemon } from '../context.js';
import type { Session } from '../../session/session.js';
import { restarting } from '../../base/errors.js';
import { applyAction, changesAction, discardAction, resumeChanges, undoAction } from './changes.js';
import { clearAction, removeAction } from './forget.js';
import { killAction } from './kill.js';
import { pasteAction, resizeAction, sendKeysAction, submitAction } from './keys.js';
import { listAction } from './list.js';
import { logAction } from './log.js';
import { continueAction, pauseAction } from './pause.js';
import { pollAction } from './poll.js';
import { resumeAction } from './resume.js';
import { signalAction } from './signal.js';
import { waitAction } from './wait.js';
import { writeAction } from './write.js';

type Handler = (d: Daemon, ctx: CallContext, p: ProcessParams) => Promise<unknown> | unknown;

/** What changes a running session: refused while a restart hands the sessions over (SPEC §19), so nothing is half done. */
const CHANGING = new Set<ProcessAction>(['write', 'send-keys', 'submit', 'paste', 'resize', 'resume', 'kill', 'signal', 'pause', 'continue', 'clear', 'remove', 'apply', 'discard', 'undo']);

const HANDLERS: Record<ProcessAction, Handler> = {
  list: listAction,
  poll: pollAction,
  log: logAction,
  write: writeAction,
  'send-keys': sendKeysAction,
  submit: submitAction,
  paste: pasteAction,
  resize: resizeAction,
  resume: resumeAction,
  kill: killAction,
  signal: signalAction,
  clear: clearAction,
  remove: removeAction,
  wait: waitAction,
  pause: pauseAction,
  continue: continueAction,
  changes: changesAction,
  apply: (d, ctx, p) => applyAction(d, ctx, p),
  discard: (d, ctx, p) => discardAction(d, ctx, p),
  undo: undoAction,
};

/**
 * The process tool: validate, then hand over to the action's own file. A session waiting for its
 * approval has no process yet, so resume, kill, remove and the input actions mean something else
 * for it (approval/answer.ts); an ended one whose changes wait for a person takes resume as apply
 * or discard (approval/changes.ts).
 */
export function processTool(d: Daemon, ctx: CallContext, raw: unknown): Promise<unknown> | unknown {
  const p = quickParams(raw) ?? parseParams(ProcessParamsSchema, raw, 'process');
  if (d.restarting && CHANGING.has(p.action)) {
    throw restarting(`the daemon is handing its sessions to a new image this moment; nothing was done: send the ${p.action} again in a second`);
  }
  const s = p.sessionId === undefined ? undefined : d.registry.find(ctx.scope, p.sessionId);
  if (s?.awaitingApproval) {
    return Promise.resolve(unstartedAction(d, ctx, p, s)).then((answer) => (answer !== undefined ? answer : dispatch(d, ctx, p, s)));
  }
  // Not async: a list or a poll answered at once is answered in the turn it was read (rpc/connection.ts).
  return dispatch(d, ctx, p, s);
}

function dispatch(d: Daemon, ctx: CallContext, p: ProcessParams, s: Session | undefined): Promise<unknown> | unknown {
  // An ended review session whose changes wait for a person: resume answers that question (SPEC §16).
  if (p.action === 'resume' && s?.interrupt?.kind === 'changes') return resumeChanges(d, ctx, p, s);
  return HANDLERS[p.action](d, ctx, p);
}

/**
 * The params of the most frequent requests, a poll or a list (action, sessionId, offset, limit,
 * timeout and nothing else), checked with the schema's own rules without zod's parse: it was a
 * third of what a poll allocated (~2.7 kB of ~8.5 kB), and with a thousand sessions every
 * young-generation collection it brings sooner is a pause of milliseconds for every client.
 * Anything else, valid or not, goes through the schema, which says what is wrong. What passes
 * here is what the schema would give (test/unit/tools/process-params.test.ts).
 */
export function quickParams(raw: unknown): ProcessParams | undefined {
  if (typeof raw !== 'object' || raw === null || Object.getPrototypeOf(raw) !== Object.prototype) return undefined;
  const r = raw as Record<string, unknown>;
  if (r.action !== 'poll' && r.action !== 'list') return undefined;
  for (const k in r) {
    const v = r[k];
    if (k === 'action') continue;
    if (k === 'sessionId') {
      if (typeof v !== 'string' || v.length === 0) return undefined;
    } else if (k === 'offset' || k === 'limit') {
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) return undefined;
    } else if (k === 'timeout') {
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return undefined;
    } else return undefined;
  }
  return r as ProcessParams;
}
