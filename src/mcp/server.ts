import { randomBytes } from 'node:crypto';
import {
  CLIENT_CAPABILITIES_META_KEY,
  createRequestStateCodec,
  inputRequired,
  inputResponse,
  McpServer,
  type CallToolResult,
  type InputRequiredResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { RpcCallError, type DaemonClient } from '../rpc/client.js';
import { INVALID_PARAMS } from '../rpc/errors.js';
import { describeWaitFor, ExecParamsSchema, type ExecParams } from '../schema/exec.js';
import { hintsReaching, reachWords } from '../schema/voice.js';
import { ProcessParamsSchema, type ProcessParams } from '../schema/process.js';
import { elicitationFor, resumeInputFrom, type InterruptView } from './elicit.js';
import { ExecResultSchema, ProcessResultSchema } from './results.js';

/**
 * The longest an MCP tool call waits for a command (exec's yieldMs, poll's timeout). Some
 * clients move a call to the background, or give up on it, after about 120 s: staying well
 * under that keeps every answer in the conversation. docs/mcp.md tells models the same.
 */
export const MCP_MAX_WAIT_MS = 50_000;
/** How often a foreground exec with a progressToken reports that it still runs. */
const PROGRESS_MS = 1000;
/** How long a question put to the person may stay open in one call (the interrupt's own expiry comes first). */
const FLOW_TTL_SECONDS = 3600;

export interface McpOptions {
  /** The scope (and its token) every call acts in. */
  scope?: string;
  token?: string;
  version: string;
  /** The approver credential, sent only with an answer the person gave through elicitation (SPEC §8, §13). */
  approverToken?: () => string | undefined;
  /** How the server reaches its daemon (`--host`, `--socket` as given): a person's `procctl …` hint in a text names them too. */
  reach?: { host?: string; socket?: string };
  /**
   * Whether the daemon made a planned restart since connection `c` was made (SPEC §19): then a
   * request `c` lost without an answer was not done (the old image answers every request it
   * read), and is sent again on a new connection.
   */
  restartedSince?: (c: DaemonClient) => Promise<boolean>;
}

/** How long a tool call rides through a planned restart (SPEC §19), in steps of a quarter second. */
const RIDE_MS = 30_000;
const RIDE_STEP_MS = 250;
const isLost = (err: unknown) => err instanceof Error && err.name === 'DaemonUnreachableError' && (err as { phase?: string }).phase === 'lost';

type DaemonResult = Record<string, unknown> & { text?: string; status?: string; sessionId?: string; interrupt?: InterruptView; output?: string };

/** A question put to the person, between the call that raised it and the call that carries the answer. */
interface Flow {
  tool: 'exec' | 'process';
  sessionId: string;
  interrupt: InterruptView;
  /** What the call would have answered without elicitation: answered as is on decline or cancel. */
  result: DaemonResult;
  /** How long to wait for the command after the answer (exec's own yieldMs). */
  waitMs: number;
}

/** What travels through the client with an input_required answer: only a handle, sealed. */
interface FlowState {
  flow: string;
}

/**
 * The MCP server over a daemon connection (`daemon()` gives the current one, reconnecting if
 * it was lost): the tools `exec` and `process` with the schemas of
 * `tools.list` (the same zod schemas), their results as text plus structured content, progress
 * while a foreground exec runs, cancellation passed on, and questions a command asks (or an
 * approval it needs) put to the person through elicitation when the client can ask.
 */
export function createMcpServer(daemon: () => Promise<DaemonClient>, opts: McpOptions): McpServer {
  const codec = createRequestStateCodec<FlowState>({ key: randomBytes(32), ttlSeconds: FLOW_TTL_SECONDS });
  const flows = new Map<string, Flow>();
  const server = new McpServer(
    { name: 'procctl', version: opts.version },
    {
      capabilities: { tools: {} },
      requestState: { verify: (state, ctx) => codec.verify(state, ctx) },
      instructions:
        'procctl runs shell commands on this host. exec runs one and answers with its output, or status "running" with a sessionId; ' +
        `then use process poll with a timeout (at most ${MCP_MAX_WAIT_MS} ms) rather than polling in a tight loop. ` +
        'waiting_input is a question the command asks: answer it with process resume. approval_required is for the user: ' +
        'a person approves or refuses it (their MCP client asks them, or they run procctl resume); poll to see when it starts. ' +
        'An ended command whose interrupt has kind "changes" holds what it wrote until a person applies or discards it the same way.',
    },
  );
  // The audit trail names the MCP client as it introduced itself (SPEC §18).
  const client = () => {
    const name = server.server.getClientVersion()?.name;
    return { kind: 'mcp', ...(typeof name === 'string' && name !== '' ? { name: name.slice(0, 200) } : {}) };
  };
  const withScope = (p: Record<string, unknown>) => ({ ...p, client: client(), ...(opts.scope ? { scope: opts.scope } : {}), ...(opts.token ? { token: opts.token } : {}) });

  const reach = reachWords(opts.reach ?? {});
  /**
   * A call to the daemon that rides through a planned restart: refused as `restarting` (nothing
   * was done), or its connection closed by the restart before the answer, it is sent again on a
   * new connection, for up to 30 s.
   */
  const call = async (method: string, params: Record<string, unknown>, ctx: ServerContext): Promise<DaemonResult> => {
    const start = Date.now();
    for (;;) {
      const client = await daemon();
      try {
        return await callOnce(client, method, params, ctx);
      } catch (err) {
        if (Date.now() - start > RIDE_MS || ctx.mcpReq.signal.aborted) throw err;
        if (err instanceof RpcCallError && err.kind === 'restarting') await new Promise((r) => setTimeout(r, RIDE_STEP_MS));
        else if (!isLost(err) || !(await opts.restartedSince?.(client).catch(() => false))) throw err;
      }
    }
  };
  const callOnce = async (client: DaemonClient, method: string, params: Record<string, unknown>, ctx: ServerContext): Promise<DaemonResult> => {
    const sent = withScope(params);
    const r = await client.call<DaemonResult>(method, sent, { signal: ctx.mcpReq.signal }).catch((err: unknown) => {
      // A daemon from before the audit trail refuses `client` by name: asked again without it.
      const refused = err instanceof RpcCallError && err.code === INVALID_PARAMS && (err.data?.path as unknown[] | undefined)?.[0] === 'client';
      if (!refused) throw err;
      const { client: _client, ...without } = sent;
      return client.call<DaemonResult>(method, without, { signal: ctx.mcpReq.signal });
    });
    return typeof r.text === 'string' ? { ...r, text: hintsReaching(r.text, reach) } : r;
  };

  /** Put the question to the person, or answer as the daemon did. */
  const answerOrAsk = async (tool: Flow['tool'], r: DaemonResult, waitMs: number, ctx: ServerContext, command?: string): Promise<CallToolResult | InputRequiredResult> => {
    // A command's question, its approval, or (it ended) the approval its held changes wait for.
    const asks = (r.status === 'waiting_input' || r.status === 'approval_required' || r.interrupt?.kind === 'changes') && r.interrupt && r.sessionId;
    if (!asks || !canElicit(server, ctx)) return toolResult(r);
    const id = randomBytes(12).toString('hex');
    flows.set(id, { tool, sessionId: r.sessionId!, interrupt: r.interrupt!, result: r, waitMs });
    const expires = setTimeout(() => flows.delete(id), FLOW_TTL_SECONDS * 1000);
    expires.unref();
    const form = elicitationFor(r.interrupt!, { sessionId: r.sessionId!, name: r.name as string | undefined, command: (r.command as string | undefined) ?? command });
    return inputRequired({ inputRequests: { answer: inputRequired.elicit(form as Parameters<typeof inputRequired.elicit>[0]) }, requestState: await codec.mint({ flow: id }, ctx) });
  };

  /** The call that carries the person's answer: give it to the session once, then answer as exec would. */
  const carryOn = async (state: FlowState, ctx: ServerContext): Promise<CallToolResult | InputRequiredResult> => {
    const flow = flows.get(state.flow);
    if (!flow) return errorResult('the question this answer belongs to is no longer open; poll the session to see where it is');
    flows.delete(state.flow);
    const reply = inputResponse(ctx.mcpReq.inputResponses, 'answer');
    // Declined or cancelled: the question stays pending, and the answer is what it was without asking.
    if (reply.kind !== 'elicit' || reply.action !== 'accept') return toolResult(flow.result);
    const input = resumeInputFrom(flow.interrupt, reply.content);
    if ('problem' in input) return toolResult({ ...flow.result, text: `${input.problem}; the question is still open.\n${flow.result.text ?? ''}` });
    let r: DaemonResult;
    try {
      // The person answered: an approval carries the approver credential; a model's own resume never does.
      const approverToken = flow.interrupt.kind === 'approval' || flow.interrupt.kind === 'changes' ? opts.approverToken?.() : undefined;
      r = await call('process', { action: 'resume', sessionId: flow.sessionId, input, ...(approverToken ? { approverToken } : {}) }, ctx);
      // An answered question lets the command go on: wait for it as exec would have (poll answers
      // at each new output, so poll until it ends, asks again, or the wait is over).
      if (flow.interrupt.kind !== 'approval' && flow.interrupt.kind !== 'changes' && r.status === 'running') {
        const until = Date.now() + flow.waitMs;
        let output = flow.result.output ?? '';
        do {
          r = await call('process', { action: 'poll', sessionId: flow.sessionId, timeout: Math.max(0, until - Date.now()) }, ctx);
          output += r.output ?? '';
        } while (r.status === 'running' && Date.now() < until);
        r = { ...r, output };
      }
    } catch (err) {
      return errorFrom(err);
    }
    return answerOrAsk(flow.tool, r, flow.waitMs, ctx);
  };

  server.registerTool(
    'exec',
    {
      title: 'Run a shell command',
      description: ExecParamsSchema.description,
      inputSchema: ExecParamsSchema,
      outputSchema: ExecResultSchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    async (args: ExecParams, ctx: ServerContext) => {
      const state = ctx.mcpReq.requestState<FlowState>();
      if (state) return carryOn(state, ctx);
      const waitMs = Math.min(args.yieldMs ?? MCP_MAX_WAIT_MS, MCP_MAX_WAIT_MS);
      const params = { ...args, ...(args.background ? {} : { yieldMs: waitMs }) };
      const stopProgress = args.background ? () => undefined : reportProgress(ctx, args.waitFor && describeWaitFor(args.waitFor));
      let r: DaemonResult;
      try {
        r = await call('exec', params, ctx);
      } catch (err) {
        return errorFrom(err);
      } finally {
        stopProgress();
      }
      return answerOrAsk('exec', r, waitMs, ctx, args.command);
    },
  );

  server.registerTool(
    'process',
    {
      title: 'Manage running and finished commands',
      description: ProcessParamsSchema.description,
      inputSchema: ProcessParamsSchema,
      outputSchema: ProcessResultSchema,
      // kill, signal and remove stop processes; list, poll and log only read.
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async (args: ProcessParams, ctx: ServerContext) => {
      const state = ctx.mcpReq.requestState<FlowState>();
      if (state) return carryOn(state, ctx);
      const params: Record<string, unknown> = { ...args };
      if ((args.action === 'poll' || args.action === 'wait') && args.timeout !== undefined) params.timeout = Math.min(args.timeout, MCP_MAX_WAIT_MS);
      let r: DaemonResult;
      try {
        r = await call('process', params, ctx);
      } catch (err) {
        return errorFrom(err);
      }
      // A poll that finds a question, or a resume that starts an approved command that asks one.
      return args.action === 'poll' || args.action === 'resume' ? answerOrAsk('process', r, MCP_MAX_WAIT_MS, ctx) : toolResult(r);
    },
  );
  return server;
}

/** Whether the client said it can put a form to the person (on this request, or at initialize). */
function canElicit(server: McpServer, ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, { elicitation?: unknown } | undefined> | undefined;
  const caps = envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? server.server.getClientCapabilities();
  return caps?.elicitation !== undefined;
}

/** While a foreground exec waits: a progress notification each second, when the caller asked for them; with waitFor, what it waits for. */
function reportProgress(ctx: ServerContext, waitingFor?: string): () => void {
  const token = ctx.mcpReq._meta?.progressToken;
  if (token === undefined) return () => undefined;
  const started = Date.now();
  const timer = setInterval(() => {
    const seconds = Math.round((Date.now() - started) / 1000);
    void ctx.mcpReq
      .notify({
        method: 'notifications/progress',
        params: { progressToken: token, progress: seconds, message: waitingFor ? `not ready after ${seconds} s: waiting until ${waitingFor}` : `still running after ${seconds} s` },
      })
      .catch(() => undefined);
  }, PROGRESS_MS);
  return () => clearInterval(timer);
}

function toolResult(r: DaemonResult): CallToolResult {
  return { content: [{ type: 'text', text: String(r.text ?? '') }], structuredContent: r };
}

function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

/** A daemon error as a tool error the model can act on; a lost daemon too (the server keeps serving). */
function errorFrom(err: unknown): CallToolResult {
  if (err instanceof RpcCallError) return errorResult(`${err.kind ? `${err.kind}: ` : ''}${err.message}`);
  // The daemon cannot be reached: say why and what the person does about it.
  if (err instanceof Error && err.name === 'DaemonUnreachableError') {
    const hint = (err as Error & { hint?: string }).hint;
    return errorResult(`${err.message}${hint ? `; ${hint}` : ''}. This is for the user to fix; tell them, then try again.`);
  }
  return errorResult((err as Error).message);
}
