import { conflict } from '../base/errors.js';
import { CheckpointParamsSchema } from '../schema/checkpoint.js';
import { parseParams } from '../schema/parse.js';
import type { CallContext, Daemon } from './context.js';
import { sessionIn } from './process/target.js';

/** A running job reports progress; the last checkpoint shows in list and poll, recent ones stay in the record. */
export function checkpointTool(d: Daemon, ctx: CallContext, raw: unknown) {
  const p = parseParams(CheckpointParamsSchema, raw, 'checkpoint');
  const s = sessionIn(d, ctx, p.sessionId);
  if (!s.running) throw conflict(`session ${s.id} has ended (${s.status}); only a running session can report checkpoints`);
  const checkpoint = s.addCheckpoint(p.name, p.data);
  s.emit('checkpoint', { name: checkpoint.name, data: checkpoint.data ?? null });
  return {};
}
