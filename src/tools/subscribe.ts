import { ALL_SCOPES } from '../config/schema.js';
import { invalid } from '../base/errors.js';
import type { EventType } from '../session/types.js';
import type { CallContext, Daemon, Requester } from './context.js';
import { sessionIn } from './process/target.js';

const EVENT_TYPES: EventType[] = ['started', 'output', 'waiting_input', 'approval_required', 'checkpoint', 'ready', 'output_match', 'network_denied', 'paused', 'continued', 'changes', 'exited'];

/** A client's subscriptions, by name; each ends with `unsubscribe` or when its connection closes. */
export class Subscriptions {
  private next = 1;
  private readonly live = new Map<string, { from: Requester; remove: () => void }>();

  /**
   * `subscribe {sessionId?, events?}` (SPEC §6): events of the caller's scope go to its connection
   * as `event` notifications. The answer says where each running session's output stands at this
   * instant (`outputChars`: its first output event will start there) and the daemon's time (`at`):
   * a client that reconnects (SPEC §19) knows where to take each session up from, including one
   * it has had no event of yet, and which sessions began after it subscribed.
   */
  subscribe(d: Daemon, ctx: CallContext, params: Record<string, unknown>, from: Requester): { subscription: string; at: string; outputChars: Record<string, number> } {
    const { sessionId, events, ...extra } = params;
    const unknown = Object.keys(extra)[0];
    if (unknown) throw invalid(`invalid subscribe params: unknown parameter "${unknown}"`, { path: [unknown], schema: true });
    if (sessionId !== undefined) {
      if (typeof sessionId !== 'string') throw invalid('sessionId must be a string', { path: ['sessionId'], schema: true });
      sessionIn(d, ctx, sessionId);
    }
    let types: Set<EventType> | undefined;
    if (events !== undefined) {
      if (!Array.isArray(events) || events.some((e) => !EVENT_TYPES.includes(e))) {
        throw invalid(`events must be a list of: ${EVENT_TYPES.join(', ')}`, { path: ['events'], schema: true });
      }
      types = new Set(events as EventType[]);
    }
    const subscription = `sub-${this.next++}`;
    const remove = d.registry.events.add({
      scope: ctx.scope,
      sessionId: sessionId as string | undefined,
      types,
      // An operator's subscription (scope "*") sees every scope, so its events say whose they are.
      deliver: ({ scope, at, ...event }) =>
        from.notify('event', { subscription, ...event, ...(ctx.scope === ALL_SCOPES ? { scope } : {}), at: new Date(at).toISOString() }),
    });
    const unhook = from.onClosed(() => {
      remove();
      this.live.delete(subscription);
    });
    this.live.set(subscription, { from, remove: () => (remove(), unhook()) });
    // Read in the same turn as the subscriber was added: no output comes between the two.
    const outputChars: Record<string, number> = {};
    const running = sessionId !== undefined ? [d.registry.get(ctx.scope, sessionId)].filter((s) => s.running) : d.registry.running(ctx.scope);
    for (const s of running) outputChars[s.id] = s.output.totalChars;
    return { subscription, at: new Date().toISOString(), outputChars };
  }

  /** `unsubscribe {subscription}`: only on the connection that made it. */
  unsubscribe(params: Record<string, unknown>, from: Requester): Record<string, never> {
    const { subscription } = params;
    if (typeof subscription !== 'string') {
      throw invalid('subscription must be a string, the one subscribe answered (e.g. "sub-1")', { path: ['subscription'], schema: true });
    }
    const sub = this.live.get(subscription);
    if (!sub || sub.from.client !== from.client) {
      throw invalid(`no subscription ${JSON.stringify(subscription)} on this connection`, { path: ['subscription'], schema: true });
    }
    sub.remove();
    this.live.delete(subscription);
    return {};
  }
}
