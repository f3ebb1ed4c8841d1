import type { EventType, SessionEvent } from './types.js';

export interface Subscriber {
  scope: string;
  sessionId?: string;
  types?: Set<EventType>;
  deliver: (event: SessionEvent) => void;
}

/** Fans session events out to subscribers; costs nothing when nobody listens. */
export class EventBus {
  private readonly subscribers = new Set<Subscriber>();
  /** Subscribers that take `output` events: only then is a chunk of output decoded as it comes. */
  private outputTakers = 0;

  get listening(): boolean {
    return this.subscribers.size > 0;
  }

  /** Someone may take `output` events (of some session). */
  get listeningForOutput(): boolean {
    return this.outputTakers > 0;
  }

  add(sub: Subscriber): () => void {
    if (this.subscribers.has(sub)) return () => this.remove(sub);
    this.subscribers.add(sub);
    if (!sub.types || sub.types.has('output')) this.outputTakers++;
    return () => this.remove(sub);
  }

  private remove(sub: Subscriber): boolean {
    if (!this.subscribers.delete(sub)) return false;
    if (!sub.types || sub.types.has('output')) this.outputTakers--;
    return true;
  }

  emit(event: SessionEvent): void {
    for (const sub of this.subscribers) {
      if (sub.scope !== '*' && sub.scope !== event.scope) continue; // '*': an operator's subscription (ALL_SCOPES)
      if (sub.sessionId !== undefined && sub.sessionId !== event.sessionId) continue;
      if (sub.types && !sub.types.has(event.type)) continue;
      sub.deliver(event);
    }
  }
}
