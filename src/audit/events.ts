import type { Resources } from '../session/record.js';

/** Who asked, as the socket's peer credentials (SO_PEERCRED) and /proc say; null where unknown. */
export interface Peer {
  uid: number | null;
  pid: number | null;
  exe: string | null;
}

/** The kind of client a request came from (SPEC §18): what it said of itself, or its voice. */
export type ClientKind = 'cli' | 'mcp' | 'console' | 'rpc';
export interface Client {
  kind: ClientKind;
  name?: string;
}

/** How an approval was answered, by which credential (SPEC §18). */
export type AnsweredBy = 'approver' | 'admin' | 'selfApprove' | 'elicitation' | 'console';

/**
 * What happened that an operator may ask about later (SPEC §18): the one internal source the
 * audit trail and the metrics both listen to (and a later OpenTelemetry exporter). Plain data,
 * made where the daemon already passes: a session's start, decision, answer, changes and end.
 */
export type AuditEvent =
  | {
      type: 'session';
      sessionId: string;
      scope: string;
      peer: Peer | null;
      client: Client;
      host: string;
      command: string;
      workdir: string;
      sandbox: string;
      network: unknown;
      changes: 'direct' | 'review';
      elevated: boolean;
    }
  | { type: 'decision'; sessionId: string; scope: string; action: 'allow' | 'deny' | 'ask' | 'review'; part: string; rule: number | null; reason: string }
  | { type: 'answer'; sessionId: string; scope: string; kind: 'approval' | 'changes'; answer: 'approve' | 'deny'; by: AnsweredBy }
  /** One connection the session's network proxy refused, as it happens (the trail keeps the first of each host; metrics count each). */
  | { type: 'network_refused'; sessionId: string; scope: string; host: string; reason: string; first: boolean }
  /** A session's proxy wrote a credential into a request to `host` (SPEC §21): each use, never the value. */
  | { type: 'credential_used'; sessionId: string; scope: string; name: string; host: string }
  /** A session's refusals by host, its totals, when it ends. */
  | { type: 'network_denied'; sessionId: string; scope: string; host: string; count: number }
  | { type: 'changes'; sessionId: string; scope: string; action: 'applied' | 'discarded' | 'undone'; files: number; conflicts?: number; refused?: number; failed?: number }
  | {
      type: 'end';
      sessionId: string;
      scope: string;
      status: string;
      exit: number | null;
      signal: string | null;
      reason: string | null;
      runtimeMs: number;
      resources: Resources | null;
      outputBytes: number;
    }
  /** The daemon handed its sessions to a new image (SPEC §19): from and to which version, how long it took, what was kept. */
  | { type: 'restart'; kind: 'planned' | 'crash'; from: string; to: string; adopted: number; lost: number; ms: number }
  /** Not written to the trail: an exec request's round trip, for the latency histogram. */
  | { type: 'exec_request'; scope: string; seconds: number };

export type AuditEventType = AuditEvent['type'];

/** Fans events out to whoever listens (the trail writer, the metrics); costs a branch when nobody does. */
export class AuditBus {
  private readonly listeners = new Set<(e: AuditEvent) => void>();

  get listening(): boolean {
    return this.listeners.size > 0;
  }

  listen(fn: (e: AuditEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(e: AuditEvent): void {
    for (const fn of this.listeners) {
      try {
        fn(e);
      } catch {
        // a listener's fault is its own: it counts and says it (the writer, the metrics)
      }
    }
  }
}
