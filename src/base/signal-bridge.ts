import type { ChildProcess } from 'node:child_process';

/** The signals a terminal or a service manager sends to ask a program to stop or reload. */
export const BRIDGED_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];

/**
 * Forward those signals, when this process receives them, to `forward` (by default the child
 * itself) until the child exits or fails; returns the detach function. While attached, the
 * signals no longer end this process by default, so the owner decides what else to do.
 */
export function bridgeSignals(
  child: Pick<ChildProcess, 'kill' | 'once' | 'off'>,
  forward: (signal: NodeJS.Signals) => void = (signal) => void child.kill(signal),
): () => void {
  const handlers = new Map<NodeJS.Signals, () => void>();
  let attached = true;
  const detach = () => {
    if (!attached) return;
    attached = false;
    for (const [signal, handler] of handlers) process.off(signal, handler);
    child.off('exit', detach);
    child.off('error', detach);
  };
  for (const signal of BRIDGED_SIGNALS) {
    const handler = () => forward(signal);
    handlers.set(signal, handler);
    process.on(signal, handler);
  }
  child.once('exit', detach);
  child.once('error', detach);
  return detach;
}
