import { EventBus } from '../../../src/session/events.js';
import { Session, type SessionInit } from '../../../src/session/session.js';

/** A session with no process behind it (`echo <id>`), for the registry's and a session's own unit tests. */
export function makeSession(id: string, scope: string, options: Partial<SessionInit> = {}): Session {
  return new Session({
    id,
    scope,
    command: `echo ${id}`,
    name: `echo ${id}`,
    cwd: '/',
    stdin: 'null',
    maxOutputChars: 1000,
    pendingMaxOutputChars: 1000,
    events: new EventBus(),
    now: () => 1_000_000,
    ...options,
  });
}
