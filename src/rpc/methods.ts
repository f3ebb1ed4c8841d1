import { invalid } from '../base/errors.js';
import { toolDescriptions } from '../schema/tools.js';
import { policyCheck } from '../tools/approval/check.js';
import { listApprovals } from '../tools/approval/list.js';
import { listRules, removeRule } from '../tools/approval/rules.js';
import { authorize, byCheckpointKey } from '../tools/call.js';
import { checkpointTool } from '../tools/checkpoint.js';
import type { Daemon, Requester } from '../tools/context.js';
import { execTool } from '../tools/exec.js';
import { processTool } from '../tools/process/index.js';
import { daemonStatusAnswer } from '../tools/status.js';
import { restartTool } from '../tools/restart.js';
import { auditVerify, historyTool } from '../tools/audit.js';
import { Subscriptions } from '../tools/subscribe.js';
import { closeShell, listShells } from '../tools/shells.js';
import type { Method, RequestContext } from './connection.js';
import type { Cancellation } from '../base/cancellation.js';

/**
 * The request's client as the tools see it: its signal, its peer, its connection's notifications.
 * One object per request with no closures, and the signal read from the request only when a tool
 * reads it (most never do; see RequestContext).
 */
class From implements Requester {
  constructor(private readonly rc: RequestContext) {}

  get signal(): AbortSignal {
    return this.rc.signal;
  }

  get cancellation(): Cancellation {
    return this.rc.cancellation;
  }

  get client(): object {
    return this.rc.connection;
  }

  peer(): ReturnType<Requester['peer']> {
    return this.rc.connection.peer();
  }

  notify(method: string, params: Record<string, unknown>): void {
    this.rc.connection.notify(method, params);
  }

  onClosed(fn: () => void): () => void {
    return this.rc.connection.onClosed(fn);
  }
}

const requester = (rc: RequestContext): Requester => new From(rc);

/** The JSON-RPC methods of SPEC §4: each hands its params and client to a tool (tools/). */
export function createMethods(d: Daemon, startedAt: number, version: string): Map<string, Method> {
  const methods = new Map<string, Method>();
  const subscriptions = new Subscriptions();
  const scoped = (fn: (ctx: ReturnType<typeof authorize>['ctx'], rest: Record<string, unknown>, from: Requester) => unknown): Method => (params, rc) => {
    const from = requester(rc);
    const { ctx, rest } = authorize(d, params, from);
    return fn(ctx, rest, from);
  };
  methods.set('exec', scoped((ctx, rest) => execTool(d, ctx, rest)));
  methods.set('process', scoped((ctx, rest) => processTool(d, ctx, rest)));
  methods.set(
    'tool',
    scoped((ctx, rest) => {
      const { tool, ...args } = rest;
      if (tool === 'exec') return execTool(d, ctx, args);
      if (tool === 'process') return processTool(d, ctx, args);
      throw invalid(`unknown tool ${JSON.stringify(tool)}; "tool" must be "exec" or "process"`, { path: ['tool'], schema: true });
    }),
  );
  methods.set('checkpoint', (params, rc) => {
    const { checkpointKey, ...withoutKey } = params;
    const from = requester(rc);
    const { ctx, rest } = checkpointKey === undefined ? authorize(d, withoutKey, from) : byCheckpointKey(d, checkpointKey, withoutKey, from);
    return checkpointTool(d, ctx, rest);
  });
  methods.set('tools.list', () => toolDescriptions());
  /** A scoped method that takes nothing but scope, token and credential: anything else is refused by name. */
  const bare = (name: string, fn: (ctx: ReturnType<typeof authorize>['ctx']) => unknown): Method =>
    scoped((ctx, rest) => {
      const unknown = Object.keys(rest)[0];
      if (unknown) throw invalid(`invalid ${name} params: unknown parameter "${unknown}"`, { path: [unknown], schema: true });
      return fn(ctx);
    });
  methods.set('approvals.list', bare('approvals.list', (ctx) => listApprovals(d, ctx)));
  methods.set('rules.list', bare('rules.list', (ctx) => listRules(d, ctx)));
  methods.set('rules.remove', scoped((ctx, rest) => removeRule(d, ctx, rest)));
  methods.set('policy.check', scoped((ctx, rest) => policyCheck(d, ctx, rest)));
  methods.set('subscribe', scoped((ctx, rest, from) => subscriptions.subscribe(d, ctx, rest, from)));
  methods.set('unsubscribe', (params, rc) => subscriptions.unsubscribe(params, requester(rc)));
  methods.set('daemon.status', () => daemonStatusAnswer(d, startedAt, version));
  methods.set('daemon.restart', bare('daemon.restart', (ctx) => restartTool(d, ctx)));
  methods.set('audit.verify', scoped((ctx, rest) => auditVerify(d, ctx, rest)));
  methods.set('history', scoped((ctx, rest) => historyTool(d, ctx, rest)));
  methods.set('shell.list', scoped((ctx, rest) => listShells(d, ctx, rest)));
  methods.set('shell.close', scoped((ctx, rest) => closeShell(d, ctx, rest)));
  return methods;
}
