export type SessionStatus = 'running' | 'waiting_input' | 'approval_required' | 'completed' | 'failed' | 'denied';

/** Who or what stopped a session (SPEC §9). */
export type StopReason = 'user' | 'timeout' | 'replaced' | 'cancelled' | 'shutdown' | 'expired';

/**
 * Why a session never ran (status `denied`, SPEC §8): a rule denied it, its approval was refused,
 * expired, or was withdrawn by kill or remove (`user`).
 */
export type DenyReason = 'rule' | 'refused' | 'expired' | 'user';

/** Why a session failed or was denied: a stop, something about the command itself, or a denial. */
export type FailReason = StopReason | 'command_not_found' | 'not_executable' | 'signal' | 'cpu_limit' | 'file_size_limit' | 'spawn_error' | 'lost' | DenyReason;

export type EventType = 'started' | 'output' | 'waiting_input' | 'approval_required' | 'checkpoint' | 'exited';

export interface SessionEvent {
  type: EventType;
  sessionId: string;
  scope: string;
  at: number;
  [key: string]: unknown;
}
