import { timingSafeEqual } from 'node:crypto';
import { forbidden, invalid } from '../errors.js';
import type { EventType } from '../session/types.js';
import { toolDescriptions } from '../schema/tools.js';
import type { CallContext, Daemon } from '../tools/context.js';
import { checkpointTool } from '../tools/checkpoint.js';
import { execTool } from '../tools/exec.js';
import { listApprovals } from '../tools/approval/list.js';
import { processTool } from '../tools/process/index.js';
import { daemonInheritance } from '../policy/env.js';
import { ALL_SCOPES, scopeRules } from '../policy/scopes.js';
import { SCOPE_NAME } from '../config/schema.js';
import { spawnFallbackReason, spawnMethod } from '../runner/native.js';
import { sandboxStatus } from '../sandbox/host.js';
import { RPC, voiceFor } from '../tools/voice.js';
import { sessionIn } from '../tools/process/target.js';
import type { Method, RequestContext } from './connection.js';

const EVENT_TYPES: EventType[] = ['started', 'output', 'waiting_input', 'approval_required', 'checkpoint', 'exited'];

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Take `scope`, `token` and `voice` off the params and check scope and token against the scope's
 * policy; the rest goes to the tool. A refusal is logged with who asked (the peer's pid and uid),
 * never the token.
 */
function scoped(d: Daemon, params: Record<string, unknown>, rc: RequestContext): { ctx: CallContext; rest: Record<string, unknown> } {
  const { scope = 'default', token, voice: voiceName, approverToken, ...rest } = params;
  if (typeof scope !== 'string' || (scope !== ALL_SCOPES && !SCOPE_NAME.test(scope))) {
    throw invalid('scope must be 1-128 letters, digits or _.:@- (or "*" with the adminToken)', { path: ['scope'], schema: true });
  }
  const rules = scopeRules(d.config());
  const auth = rules.authorize(scope, token);
  if (!auth.ok) {
    d.log.warn({ scope, peer: rc.connection.peer() }, `refused a request: ${auth.why}`);
    throw forbidden(auth.why);
  }
  // Who reads the text: the CLI asks for its own words (`procctl poll ID`), everyone else gets the tools'.
  const voice = voiceFor(voiceName, scope);
  if (!voice) throw invalid('voice must be "rpc" or "cli"', { path: ['voice'], schema: true });
  const approver = approverToken !== undefined && rules.isApprover(approverToken, d.approverMade);
  const pid = () => {
    const peer = rc.connection.peer();
    return 'pid' in peer ? peer.pid : peer;
  };
  return { ctx: { scope, signal: rc.signal, voice, caller: { pid, approver } }, rest };
}

let nextSubscription = 1;

/** The JSON-RPC methods of SPEC §4. */
export function createMethods(d: Daemon, startedAt: number, version: string): Map<string, Method> {
  const methods = new Map<string, Method>();
  methods.set('exec', (params, rc) => {
    const { ctx, rest } = scoped(d, params, rc);
    return execTool(d, ctx, rest);
  });
  methods.set('process', (params, rc) => {
    const { ctx, rest } = scoped(d, params, rc);
    return processTool(d, ctx, rest);
  });
  methods.set('tool', (params, rc) => {
    const { ctx, rest } = scoped(d, params, rc);
    const { tool, ...args } = rest;
    if (tool === 'exec') return execTool(d, ctx, args);
    if (tool === 'process') return processTool(d, ctx, args);
    throw invalid(`unknown tool ${JSON.stringify(tool)}; "tool" must be "exec" or "process"`, { path: ['tool'], schema: true });
  });
  methods.set('checkpoint', (params, rc) => {
    const { checkpointKey, ...withoutKey } = params;
    if (checkpointKey === undefined) {
      const { ctx, rest } = scoped(d, withoutKey, rc);
      return checkpointTool(d, ctx, rest);
    }
    // A job's own key stands in for its scope's token, for its own session only.
    const { scope = 'default', token: _token, voice: _voice, ...rest } = withoutKey;
    const session = typeof scope === 'string' && typeof rest.sessionId === 'string' ? d.registry.find(scope, rest.sessionId) : undefined;
    if (typeof checkpointKey !== 'string' || !session?.checkpointKey || !sameToken(checkpointKey, session.checkpointKey)) {
      throw forbidden('checkpointKey is not the key of that session: a job reports only its own progress, with $PROCCTL_CHECKPOINT_KEY');
    }
    return checkpointTool(d, { scope: session.scope, signal: rc.signal, voice: RPC }, rest);
  });
  methods.set('tools.list', () => toolDescriptions());
  methods.set('approvals.list', (params, rc) => {
    const { ctx, rest } = scoped(d, params, rc);
    const unknown = Object.keys(rest)[0];
    if (unknown) throw invalid(`invalid approvals.list params: unknown parameter "${unknown}"`, { path: [unknown], schema: true });
    return listApprovals(d, ctx);
  });
  methods.set('subscribe', (params, rc) => {
    const { ctx, rest } = scoped(d, params, rc);
    const { sessionId, events, ...extra } = rest;
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
    const subscription = `sub-${nextSubscription++}`;
    const conn = rc.connection;
    const remove = d.registry.events.add({
      scope: ctx.scope,
      sessionId: sessionId as string | undefined,
      types,
      // An operator's subscription (scope "*") sees every scope, so its events say whose they are.
      deliver: ({ scope, at, ...event }) =>
        conn.notify('event', { subscription, ...event, ...(ctx.scope === ALL_SCOPES ? { scope } : {}), at: new Date(at).toISOString() }),
    });
    const unhook = conn.onClosed(() => {
      remove();
      subscriptions.delete(subscription);
    });
    subscriptions.set(subscription, { conn, remove: () => (remove(), unhook()) });
    return { subscription };
  });
  methods.set('unsubscribe', (params, rc) => {
    const { subscription } = params;
    if (typeof subscription !== 'string') {
      throw invalid('subscription must be a string, the one subscribe answered (e.g. "sub-1")', { path: ['subscription'], schema: true });
    }
    const sub = subscriptions.get(subscription);
    if (!sub || sub.conn !== rc.connection) {
      throw invalid(`no subscription ${JSON.stringify(subscription)} on this connection`, { path: ['subscription'], schema: true });
    }
    sub.remove();
    subscriptions.delete(subscription);
    return {};
  });
  methods.set('daemon.status', async () => ({
    version,
    pid: process.pid,
    uptimeMs: Date.now() - startedAt,
    socket: d.socketPath,
    sessions: d.registry.counts(),
    closing: d.closing,
    node: process.version,
    spawner: spawnMethod(),
    state: { dir: d.state.dir, ...d.state.status() },
    env: { withheld: daemonInheritance(d.config().env).withheld },
    spawnerReason: spawnFallbackReason(),
    sandbox: await sandboxStatus(d.config()),
  }));
  return methods;
}

const subscriptions = new Map<string, { conn: RequestContext['connection']; remove: () => void }>();
