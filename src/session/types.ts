export type SessionStatus = 'running' | 'waiting_input' | 'approval_required' | 'completed' | 'failed' | 'denied';

/** Who or what stopped a session (SPEC §9). */
export type StopReason = 'user' | 'timeout' | 'replaced' | 'cancelled' | 'shutdown' | 'expired';

/** Why a session failed: a stop, or something about the command itself. */
export type FailReason = StopReason | 'command_not_found' | 'not_executable' | 'signal' | 'spawn_error' | 'lost';

export type EventType = 'started' | 'output' | 'waiting_input' | 'approval_required' | 'checkpoint' | 'exited';

export interface SessionEvent {
  type: EventType;
  sessionId: string;
  scope: string;
  at: number;
  [key: string]: unknown;
}
