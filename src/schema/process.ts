import { constants } from 'node:os';
import { z } from 'zod';

export const PROCESS_ACTIONS = ['list', 'poll', 'log', 'write', 'kill', 'signal', 'clear', 'remove'] as const;
export type ProcessAction = (typeof PROCESS_ACTIONS)[number];

const SIGNALS = Object.keys(constants.signals);

export const ProcessParamsSchema = z
  .strictObject({
    action: z
      .enum(PROCESS_ACTIONS, { error: () => `unknown action; actions are ${PROCESS_ACTIONS.join(', ')}` })
      .describe(
        'list: sessions of the scope. poll: new output since the last poll (timeout waits). log: page the output by lines. write: send to stdin. kill: stop the process group (stop signal, grace, SIGKILL). signal: deliver one signal to the group, as Ctrl-C would. clear: forget a finished session. remove: kill if running, then forget.',
      ),
    sessionId: z.string().min(1).optional().describe('The session; required by every action but list and kill {all:true}.'),
    timeout: z.number().min(0).optional().describe('poll: wait up to this many ms (at most 120000) for new output, exit or an interrupt.'),
    offset: z.number().int().min(0).optional().describe('log: first line to return (0-based).'),
    limit: z.number().int().min(0).optional().describe('log: number of lines; alone, the last N lines.'),
    data: z.string().optional().describe('write: text to send to stdin.'),
    eof: z.boolean().optional().describe('write: close stdin after the data.'),
    signal: z
      .string()
      .refine((s) => SIGNALS.includes(s.toUpperCase().startsWith('SIG') ? s.toUpperCase() : `SIG${s.toUpperCase()}`), {
        message: 'unknown signal; use a name such as SIGTERM, SIGINT, SIGHUP or SIGKILL',
      })
      .optional()
      .describe('kill: the stop signal (default SIGTERM; SIGKILL follows after the grace). signal: the signal to deliver.'),
    graceMs: z.number().int().min(0).optional().describe('kill: ms between the stop signal and SIGKILL.'),
    reason: z.string().max(500).optional().describe('kill: a note kept in the final record.'),
    all: z.boolean().optional().describe('kill: stop every running session of the scope.'),
  })
  .describe('Manage sessions started by exec: list, poll, log, write, kill, clear, remove.');

export type ProcessParams = z.output<typeof ProcessParamsSchema>;

export function normalizeSignal(s: string): NodeJS.Signals {
  const up = s.toUpperCase();
  return (up.startsWith('SIG') ? up : `SIG${up}`) as NodeJS.Signals;
}
