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

  get listening(): boolean {
    return this.subscribers.size > 0;
  }

  add(sub: Subscriber): () => void {
    this.subscribers.add(sub);
    return () => this.subscribers.delete(sub);
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
