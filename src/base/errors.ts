/** The kinds of application error a client can act on (SPEC §4). */
export type ErrorKind = 'not_found' | 'conflict' | 'invalid' | 'forbidden' | 'limit' | 'unavailable' | 'restarting';

/** An error that is a value: a kind, a message a person can act on, and optional details. */
export class ProcctlError extends Error {
  readonly kind: ErrorKind;
  readonly details: Record<string, unknown> | undefined;

  constructor(kind: ErrorKind, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'ProcctlError';
    this.kind = kind;
    this.details = details;
  }
}

export const notFound = (message: string, details?: Record<string, unknown>) =>
  new ProcctlError('not_found', message, details);
export const conflict = (message: string, details?: Record<string, unknown>) =>
  new ProcctlError('conflict', message, details);
export const invalid = (message: string, details?: Record<string, unknown>) =>
  new ProcctlError('invalid', message, details);
export const forbidden = (message: string, details?: Record<string, unknown>) =>
  new ProcctlError('forbidden', message, details);
export const limit = (message: string, details?: Record<string, unknown>) =>
  new ProcctlError('limit', message, details);
export const unavailable = (message: string, details?: Record<string, unknown>) =>
  new ProcctlError('unavailable', message, details);
/** The daemon is handing over to a new image (SPEC §19): retry in a moment, nothing was done. */
export const restarting = (message: string, details?: Record<string, unknown>) =>
  new ProcctlError('restarting', message, details);
