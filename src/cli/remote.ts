import { EventEmitter } from 'node:events';
import { constants } from 'node:os';
import type { ChildProcess } from 'node:child_process';
import { bridgeSignals } from '../base/signal-bridge.js';
import { RpcCallError } from '../rpc/client.js';
import type { Caller } from './feed.js';
import { note, scoped, type GlobalOptions } from './context.js';

/**
 * A session of the daemon seen as a child process by the signal bridge: `kill` delivers a
 * signal to its process group, and it emits `exit` once it has ended (or we stop watching it).
 */
class RemoteSession extends EventEmitter {
  constructor(private readonly deliver: (signal: NodeJS.Signals) => void) {
    super();
  }

  kill(signal: NodeJS.Signals | number = 'SIGTERM'): boolean {
    if (typeof signal === 'string') this.deliver(signal);
    return true;
  }
}

export interface SignalForwarding {
  /** Name the session; signals received before this are delivered then. */
  target(id: string): void;
  /** Deliver a signal as if this process had received it (Ctrl-C read in raw mode). */
  deliver(signal: NodeJS.Signals): void;
  /** Stop forwarding and restore the default signal behaviour. */
  stop(): void;
}

/**
 * Forward SIGINT, SIGTERM, SIGHUP and SIGQUIT that this process receives to a session's
 * process group with `process signal`, as a terminal delivers Ctrl-C to a local command; this
 * process keeps running until the session ends. Starts before the session id is known, so a
 * Ctrl-C during start-up is not lost (it is delivered once the session exists); the same
 * signal twice before then ends this process, as it would have without the bridge.
 */
export function forwardSignals(client: Caller, g: GlobalOptions): SignalForwarding {
  let id: string | undefined;
  const early: NodeJS.Signals[] = [];
  const send = (signal: NodeJS.Signals) => {
    if (id === undefined) {
      // A second signal while the daemon has not even answered: do not hang on it.
      if (early.includes(signal)) process.exit(128 + (constants.signals[signal] ?? 0));
      return void early.push(signal);
    }
    client.call('process', scoped(g, { action: 'signal', sessionId: id, signal })).catch((err) => {
      // A session that has just ended has nothing left to signal; its end is reported anyway.
      if (err instanceof RpcCallError && err.kind === 'conflict') return;
      note(`procctl: could not forward ${signal}: ${err instanceof Error ? err.message : String(err)}`);
    });
  };
  const remote = new RemoteSession(send);
  // The bridge needs only kill/once/off; ChildProcess's once/off are typed to return a ChildProcess.
  bridgeSignals(remote as unknown as Pick<ChildProcess, 'kill' | 'once' | 'off'>, (signal) => remote.kill(signal));
  return {
    target(sessionId) {
      id = sessionId;
      for (const signal of early.splice(0)) send(signal);
    },
    deliver: send,
    stop: () => remote.emit('exit'),
  };
}
