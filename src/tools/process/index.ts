import { ProcessParamsSchema, type ProcessAction, type ProcessParams } from '../../schema/process.js';
import { parseParams } from '../../schema/parse.js';
import type { CallContext, Daemon } from '../context.js';
import { clearAction, removeAction } from './forget.js';
import { killAction } from './kill.js';
import { pasteAction, resizeAction, sendKeysAction, submitAction } from './keys.js';
import { listAction } from './list.js';
import { logAction } from './log.js';
import { pollAction } from './poll.js';
import { resumeAction } from './resume.js';
import { signalAction } from './signal.js';
import { writeAction } from './write.js';

type Handler = (d: Daemon, ctx: CallContext, p: ProcessParams) => Promise<unknown> | unknown;

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
};

/** The process tool: validate, then hand over to the action's own file. */
export async function processTool(d: Daemon, ctx: CallContext, raw: unknown) {
  const p = parseParams(ProcessParamsSchema, raw, 'process');
  return HANDLERS[p.action](d, ctx, p);
}
