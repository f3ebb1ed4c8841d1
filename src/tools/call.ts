import { timingSafeEqual } from 'node:crypto';
import { SCOPE_NAME } from '../config/schema.js';
import { forbidden, invalid } from '../base/errors.js';
import { ALL_SCOPES, scopeRules, type ScopeRules } from '../policy/scopes.js';
import { RPC, voiceFor, type Voice } from '../schema/voice.js';
import type { Cancellation } from '../base/cancellation.js';
import type { Client } from '../audit/events.js';
import type { Caller, CallContext, Daemon, Requester } from './context.js';
import { clientOf, originOf } from './trail.js';

/**
 * Take `scope`, `token`, `voice`, `approverToken` and `client` off a request's params and check
 * scope and token against the scope's policy (SPEC §8); the rest goes to the tool. A refusal is
 * logged with who asked (the peer's pid and uid), never the token.
 */
export function authorize(d: Daemon, params: Record<string, unknown>, from: Requester): { ctx: CallContext; rest: Record<string, unknown> } {
  const { scope = 'default', token, voice: voiceName, approverToken, client } = params;
  if (typeof scope !== 'string' || (scope !== ALL_SCOPES && !SCOPE_NAME.test(scope))) {
    throw invalid('scope must be 1-128 letters, digits or _.:@- (or "*" with the adminToken)', { path: ['scope'], schema: true });
  }
  const rules = scopeRules(d.config());
  const approverMade = d.approverMade;
  const auth = rules.authorize(scope, token, scope === ALL_SCOPES ? () => rules.isApprover(approverToken, approverMade) : undefined);
  if (!auth.ok) {
    d.log.warn({ scope, peer: from.peer() }, `refused a request: ${auth.why}`);
    throw forbidden(auth.why);
  }
  // Who reads the text: the CLI asks for its own words (`procctl poll ID`), everyone else gets the tools'.
  const voice = voiceFor(voiceName, scope);
  if (!voice) throw invalid('voice must be "rpc" or "cli"', { path: ['voice'], schema: true });
  return { ctx: new Call(scope, voice, from, clientOf(client, voiceName), rules, approverToken, approverMade), rest: carriesOwn(params) ? toolParams(params) : params };
}

/**
 * Whether `params` carries any of the request's own params. Most requests (a poll, a list) carry
 * none, and hand their params to the tool as they are: a copy without them was made per request.
 */
function carriesOwn(params: Record<string, unknown>): boolean {
  return 'scope' in params || 'token' in params || 'voice' in params || 'approverToken' in params || 'client' in params;
}

function toolParams(params: Record<string, unknown>): Record<string, unknown> {
  const { scope: _scope, token: _token, voice: _voice, approverToken: _approverToken, client: _client, ...rest } = params;
  return rest;
}

/**
 * A request's context. Its signal is the requester's, made only when a tool asks for it; who asks
 * (`caller`) is put together only when a tool asks (one that records or judges who asked, not a
 * poll or a list), from what the request carried and the rules and credential of its moment. A
 * job's report by its checkpoint key has no client said, and no caller.
 */
class Call implements CallContext {
  private who: Caller | undefined;

  constructor(
    readonly scope: string,
    readonly voice: Voice,
    private readonly from: Requester,
    private readonly client?: Client,
    private readonly rules?: ScopeRules,
    private readonly approverToken?: unknown,
    private readonly approverMade?: string,
  ) {}

  get signal(): AbortSignal {
    return this.from.signal;
  }

  get cancellation(): Cancellation {
    return this.from.cancellation;
  }

  get caller(): Caller | undefined {
    const { from, client, rules, approverToken } = this;
    if (this.who !== undefined || client === undefined || rules === undefined) return this.who;
    const approver = approverToken !== undefined && rules.isApprover(approverToken, this.approverMade);
    const credential = approver ? (rules.isAdmin(approverToken) ? 'admin' : 'approver') : undefined;
    const pid = () => {
      const peer = from.peer();
      return 'pid' in peer ? peer.pid : peer;
    };
    this.who = { pid, approver, ...(credential ? { credential } : {}), origin: () => originOf(from, client) };
    return this.who;
  }
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * A job's own `checkpointKey` (PROCCTL_CHECKPOINT_KEY) stands in for its scope's token, for its
 * own session only: the context of that session's scope, or `forbidden`.
 */
export function byCheckpointKey(d: Daemon, checkpointKey: unknown, params: Record<string, unknown>, from: Requester): { ctx: CallContext; rest: Record<string, unknown> } {
  const { scope = 'default', token: _token, voice: _voice, ...rest } = params;
  const session = typeof scope === 'string' && typeof rest.sessionId === 'string' ? d.registry.find(scope, rest.sessionId) : undefined;
  if (typeof checkpointKey !== 'string' || !session?.checkpointKey || !sameToken(checkpointKey, session.checkpointKey)) {
    throw forbidden('checkpointKey is not the key of that session: a job reports only its own progress, with $PROCCTL_CHECKPOINT_KEY');
  }
  return { ctx: new Call(session.scope, RPC, from), rest };
}
