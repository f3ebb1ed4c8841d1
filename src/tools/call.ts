import { timingSafeEqual } from 'node:crypto';
import { SCOPE_NAME } from '../config/schema.js';
import { forbidden, invalid } from '../base/errors.js';
import { ALL_SCOPES, scopeRules } from '../policy/scopes.js';
import { RPC, voiceFor, type Voice } from '../schema/voice.js';
import type { Cancellation } from '../base/cancellation.js';
import type { Caller, CallContext, Daemon, Requester } from './context.js';
import { originOf } from './trail.js';

/**
 * Take `scope`, `token`, `voice` and `approverToken` off a request's params and check scope and
 * token against the scope's policy (SPEC §8); the rest goes to the tool. A refusal is logged with
 * who asked (the peer's pid and uid), never the token.
 */
export function authorize(d: Daemon, params: Record<string, unknown>, from: Requester): { ctx: CallContext; rest: Record<string, unknown> } {
  const { scope = 'default', token, voice: voiceName, approverToken, client, ...rest } = params;
  if (typeof scope !== 'string' || (scope !== ALL_SCOPES && !SCOPE_NAME.test(scope))) {
    throw invalid('scope must be 1-128 letters, digits or _.:@- (or "*" with the adminToken)', { path: ['scope'], schema: true });
  }
  const rules = scopeRules(d.config());
  const auth = rules.authorize(scope, token, () => rules.isApprover(approverToken, d.approverMade));
  if (!auth.ok) {
    d.log.warn({ scope, peer: from.peer() }, `refused a request: ${auth.why}`);
    throw forbidden(auth.why);
  }
  // Who reads the text: the CLI asks for its own words (`procctl poll ID`), everyone else gets the tools'.
  const voice = voiceFor(voiceName, scope);
  if (!voice) throw invalid('voice must be "rpc" or "cli"', { path: ['voice'], schema: true });
  const approver = approverToken !== undefined && rules.isApprover(approverToken, d.approverMade);
  const credential = approver ? (rules.isAdmin(approverToken) ? 'admin' : 'approver') : undefined;
  const origin = originOf(from, client, voiceName);
  const pid = () => {
    const peer = from.peer();
    return 'pid' in peer ? peer.pid : peer;
  };
  return { ctx: new Call(scope, voice, { pid, approver, ...(credential ? { credential } : {}), origin }, from), rest };
}

/** A request's context, whose signal is the requester's, read (and so made) only when a tool asks for it. */
class Call implements CallContext {
  constructor(
    readonly scope: string,
    readonly voice: Voice,
    readonly caller: Caller | undefined,
    private readonly from: Requester,
  ) {}

  get signal(): AbortSignal {
    return this.from.signal;
  }

  get cancellation(): Cancellation {
    return this.from.cancellation;
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
  return { ctx: new Call(session.scope, RPC, undefined, from), rest };
}
