import { readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import type { AnsweredBy, Client, ClientKind, Peer } from '../audit/events.js';
import { invalid } from '../base/errors.js';
import type { Judgement, PartDecision } from '../policy/approvals.js';
import { networkOf } from '../sandbox/network.js';
import { networkShown } from '../sandbox/credentials.js';
import type { ExecParams } from '../schema/exec.js';
import type { Session } from '../session/session.js';
import { scopeRules } from '../policy/scopes.js';
import type { CallContext, Daemon, Requester } from './context.js';

/**
 * What the tools tell the audit trail and the metrics (SPEC §18), from the few places a session's
 * life already passes: its start (exec, the gate), the decision, a person's answer, its changes
 * and its end. Plain events on the daemon's bus; writing them is the trail's business, off the
 * request's path. Nothing is built when nobody listens.
 */

const HOST = hostname();
const KINDS: readonly ClientKind[] = ['cli', 'mcp', 'console', 'rpc'];
/** A connection's peer, looked up once: its executable is read while the client is surely there. */
const peers = new WeakMap<object, Peer | null>();

/** The client as a request names none: the CLI is known by its voice. Shared, never changed. */
const CLI_CLIENT: Client = Object.freeze({ kind: 'cli' });
const RPC_CLIENT: Client = Object.freeze({ kind: 'rpc' });

/**
 * The client's kind and name as a request says (`client: {kind, name?}`, a request param like
 * `voice`; the CLI is known by its voice), checked: what the client claims, where the peer's uid,
 * pid and exe (originOf) are the kernel's.
 */
export function clientOf(client: unknown, voice: unknown): Client {
  if (client === undefined) return voice === 'cli' ? CLI_CLIENT : RPC_CLIENT;
  const c = client as { kind?: unknown; name?: unknown };
  if (typeof client !== 'object' || client === null || !KINDS.includes(c.kind as ClientKind) || (c.name !== undefined && (typeof c.name !== 'string' || c.name.length > 200))) {
    throw invalid(`client must be {kind: "cli"|"mcp"|"console"|"rpc", name?: a string of at most 200 characters}`, { path: ['client'], schema: true });
  }
  return { kind: c.kind as ClientKind, ...(typeof c.name === 'string' ? { name: c.name } : {}) };
}

/** Who asks: the peer's credentials (looked up once per connection) and the client as it said (clientOf). */
export function originOf(from: Requester, client: Client): { peer: Peer | null; client: Client } {
  return { peer: peerOf(from), client };
}

function peerOf(from: Requester): Peer | null {
  if (peers.has(from.client)) return peers.get(from.client)!;
  const p = from.peer();
  let peer: Peer | null = null;
  if ('pid' in p) {
    let exe: string | null = null;
    try {
      exe = readlinkSync(`/proc/${p.pid}/exe`);
    } catch {
      // another user's process, or gone: the pid and uid still say who
    }
    peer = { uid: p.uid ?? null, pid: p.pid, exe };
  }
  peers.set(from.client, peer);
  return peer;
}

/** A session was asked for: who asked, what and where, how confined; and what the rules decided, when they judged it. */
export function noteStarted(d: Daemon, ctx: CallContext, s: Session, p: ExecParams, o: { review: boolean; judgement?: Judgement; asked?: string }): void {
  if (!d.audit.listening) return;
  const config = d.config();
  const elevated = p.elevated === true;
  const sandboxed = !elevated && config.sandbox.mode !== 'off';
  const origin = ctx.caller?.origin() ?? { peer: null, client: { kind: 'rpc' as const } };
  d.audit.emit({
    type: 'session',
    sessionId: s.id,
    scope: s.scope,
    peer: origin.peer,
    client: origin.client,
    host: HOST,
    command: s.command,
    workdir: s.cwd,
    sandbox: elevated ? 'elevated' : config.sandbox.mode,
    network: sandboxed ? networkShown(networkOf(config, s.scope)) : 'host',
    changes: o.review ? 'review' : 'direct',
    elevated,
  });
  const j = o.judgement;
  if (j) noteDecision(d, s, j.decision, j.decision === 'review' && j.review ? j.review : j.decided);
  else if (o.asked) d.audit.emit({ type: 'decision', sessionId: s.id, scope: s.scope, action: 'ask', part: s.command, rule: null, reason: o.asked });
}

function noteDecision(d: Daemon, s: Session, action: Judgement['decision'], part: PartDecision): void {
  d.audit.emit({ type: 'decision', sessionId: s.id, scope: s.scope, action, part: part.text.slice(0, 1000), rule: part.rule ?? null, reason: part.reason });
}

/** A person answered an approval (of a command, or of held changes): yes or no, and by which credential. */
export function noteAnswer(d: Daemon, ctx: CallContext, s: Session, kind: 'approval' | 'changes', confirm: boolean): void {
  if (!d.audit.listening) return;
  d.audit.emit({ type: 'answer', sessionId: s.id, scope: s.scope, kind, answer: confirm ? 'approve' : 'deny', by: answeredBy(d, ctx, s) });
}

function answeredBy(d: Daemon, ctx: CallContext, s: Session): AnsweredBy {
  const caller = ctx.caller;
  const kind = caller?.origin().client.kind;
  if (caller?.approver) {
    if (kind === 'console') return 'console';
    if (kind === 'mcp') return 'elicitation';
    return caller.credential === 'admin' ? 'admin' : 'approver';
  }
  return scopeRules(d.config()).policy(s.scope).selfApprove ? 'selfApprove' : 'approver';
}

/** Held changes were applied, discarded or undone, with how many files. */
export function noteChanges(d: Daemon, s: Session, action: 'applied' | 'discarded' | 'undone', counts: { files: number; conflicts?: number; refused?: number; failed?: number }): void {
  if (!d.audit.listening) return;
  d.audit.emit({ type: 'changes', sessionId: s.id, scope: s.scope, action, ...counts });
}

/** A session ended (ran, or never started): its network refusals by host, then how it ended and what it used. */
export function noteEnded(d: Daemon, s: Session): void {
  if (!d.audit.listening) return;
  for (const n of s.networkDenied) d.audit.emit({ type: 'network_denied', sessionId: s.id, scope: s.scope, host: n.host, count: n.count });
  d.audit.emit({
    type: 'end',
    sessionId: s.id,
    scope: s.scope,
    status: s.status,
    exit: s.exitCode,
    signal: s.signal,
    reason: s.reason ?? null,
    runtimeMs: s.runtimeMs,
    resources: s.resources ?? null,
    outputBytes: s.spool?.totalBytes ?? s.output.totalChars,
  });
}

/** An exec request's round trip, for the latency histogram (not written to the trail). */
export function noteExecRequest(d: Daemon, scope: string, startedAt: bigint): void {
  if (!d.audit.listening) return;
  d.audit.emit({ type: 'exec_request', scope, seconds: Number(process.hrtime.bigint() - startedAt) / 1e9 });
}
