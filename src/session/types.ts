import type { FailReasonSchema, SessionStatusSchema, StopReason } from './record.js';
import type { z } from 'zod';

export type { StopReason };

export type SessionStatus = z.infer<typeof SessionStatusSchema>;

/**
 * Why a session never ran (status `denied`, SPEC §8): a rule denied it, its approval was refused,
 * expired, or was withdrawn by kill or remove (`user`).
 */
export type DenyReason = 'rule' | 'refused' | 'expired' | 'user';

/** Why a session failed or was denied: a stop, something about the command itself, or a denial. */
export type FailReason = z.infer<typeof FailReasonSchema>;

export type EventType = 'started' | 'output' | 'waiting_input' | 'approval_required' | 'checkpoint' | 'ready' | 'output_match' | 'network_denied' | 'paused' | 'continued' | 'changes' | 'exited';

/** Which of a backgrounded session's ends are notifications (SPEC §5 `notify`). */
export type Notify = 'exit' | 'failure' | 'never' | { match: string };

export interface SessionEvent {
  type: EventType;
  sessionId: string;
  scope: string;
  at: number;
  [key: string]: unknown;
}
