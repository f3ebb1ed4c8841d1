import { z } from 'zod';

/**
 * What the tools answer, as MCP output schemas. The daemon's results are the contract (SPEC §5,
 * §6); these name the fields a model can rely on and let the rest through, so a field added to
 * a result never makes a call fail validation.
 */

const STATUS = z
  .enum(['running', 'waiting_input', 'approval_required', 'completed', 'failed', 'denied'])
  .describe('running: it goes on (poll it); waiting_input: it asks a question (resume); approval_required: it has not started (resume {confirm}); completed/failed/denied: it is over.');

const INTERRUPT = z
  .looseObject({
    id: z.string(),
    kind: z.enum(['confirm', 'text', 'secret', 'select', 'approval', 'changes']),
    reason: z.string(),
    fields: z.array(z.looseObject({ name: z.string(), type: z.string(), label: z.string(), required: z.boolean() })),
    expiresAt: z.string(),
  })
  .describe('The question the session waits on, answered once with process resume; kind "changes": an ended review session whose changes wait for a person.');

export const ExecResultSchema = z
  .looseObject({
    status: STATUS,
    sessionId: z.string(),
    name: z.string().nullish(),
    exitCode: z.number().nullish(),
    signal: z.string().nullish(),
    reason: z.string().nullish(),
    output: z.string().nullish().describe('What the command printed (stdout and stderr as they came), capped.'),
    truncated: z.boolean().nullish(),
    interrupt: INTERRUPT.nullish(),
    ready: z.boolean().nullish().describe('With waitFor: whether what it waits for held (a port answers, a line matched, ...).'),
    yielded: z.enum(['time', 'quiet']).nullish().describe('Running: what ended the wait, yieldMs ("time") or yieldOnQuietMs ("quiet").'),
    text: z.string().describe('The answer in words, with the next step: the same as the text content.'),
  })
  .describe('The exec result (SPEC §5).');

export const ProcessResultSchema = z
  .looseObject({
    status: STATUS.nullish(),
    sessionId: z.string().nullish(),
    sessions: z.array(z.looseObject({ sessionId: z.string(), status: STATUS })).nullish().describe('list: the sessions of the scope, newest first. wait: each session waited for, as it is now.'),
    done: z.array(z.string()).nullish().describe('wait: the sessions that ended or wait for input or an approval.'),
    retryInMs: z.number().nullish().describe('poll: when to poll again while it runs (1 s after new output, backing off to 60 s).'),
    output: z.string().nullish(),
    interrupt: INTERRUPT.nullish(),
    text: z.string().describe('The answer in words, with the next step: the same as the text content.'),
  })
  .describe('The process result (SPEC §6): its fields depend on the action.');
