import { constants } from 'node:os';
import { z } from 'zod';

export const PROCESS_ACTIONS = ['list', 'poll', 'log', 'write', 'send-keys', 'submit', 'paste', 'resize', 'resume', 'kill', 'signal', 'clear', 'remove', 'wait', 'pause', 'continue', 'changes', 'apply', 'discard', 'undo'] as const;
export type ProcessAction = (typeof PROCESS_ACTIONS)[number];

const SIGNALS = Object.keys(constants.signals);

/** A count or a 0-based position (log lines, list sessions); the error is prefixed with the field's name. */
const count = () => {
  const error = 'must be a whole number, 0 or more';
  return z.number({ error }).int({ error }).min(0, { error });
};

export const ProcessParamsSchema = z
  .strictObject({
    action: z
      .enum(PROCESS_ACTIONS, { error: () => `unknown action; actions are ${PROCESS_ACTIONS.join(', ')}` })
      .describe(
        'list: sessions of the scope, newest first (limit/offset page them). poll: new output since the last poll (timeout waits). log: page the output by lines. write: send to stdin. send-keys/submit/paste: type into a terminal session. resize: change its size. resume: answer a waiting_input interrupt, or an approval_required approval ({confirm:true} runs the command and answers as exec would, {confirm:false} denies it), or the changes approval of an ended review session (interrupt kind "changes": {confirm:true} applies them, {confirm:false} discards them), once; approvals are answered by a person. kill: stop the process group (stop signal, grace, SIGKILL); a session waiting for approval is denied instead. signal: deliver one signal to the group, as Ctrl-C would. clear: forget a finished session. remove: kill if running, then forget. wait: sleep until any (mode:"all": every one) of sessionIds has ended or waits for input or approval, at most timeout ms. pause: freeze every process of the session (its timeout and input detection wait too). continue: let a paused session run on. changes: what a review session (exec changes:"review") changed in its workspaces, held until applied: the paths with their kind and sizes, then a unified diff (stat: the list alone; paths: only those; offset/limit page the diff by lines). apply: write those changes into the workspace (paths: only those; force: overwrite paths the workspace changed meanwhile), once. discard: drop them, once. undo: put back what an apply replaced.',
      ),
    sessionId: z.string().min(1).optional().describe('The session; required by every action but list and kill {all:true}.'),
    timeout: z.number().min(0).optional().describe('poll: wait up to this many ms (at most 120000) for new output, exit or an interrupt. wait: at most this many ms (default 30000, at most 120000).'),
    sessionIds: z.array(z.string().min(1)).min(1).max(100).optional().describe('wait: the sessions to wait for (1 to 100).'),
    mode: z.enum(['any', 'all']).optional().describe('wait: "any" (default) returns when one of them is done, "all" when every one is.'),
    offset: count()
      .optional()
      .describe('log, changes: first line to return (0-based). list: how many of the newest sessions to skip (default 0).'),
    limit: count()
      .optional()
      .describe('log, changes: number of lines; alone (log), the last N lines. list: at most this many sessions (default: all); the text says how to get the next page.'),
    data: z.string().optional().describe('write: text to send to stdin.'),
    eof: z.boolean().optional().describe('write: close stdin after the data (on a terminal: send ^D).'),
    keys: z
      .array(z.string().min(1))
      .optional()
      .describe('send-keys: tmux-style key names (Enter, Tab, Escape, C-c, M-x, Up, PageDown, F1-F12) or single characters.'),
    literal: z.boolean().optional().describe('send-keys: send keys as literal text instead of key names.'),
    hex: z.array(z.string()).optional().describe('send-keys: raw bytes as hex ("1b", "0x03").'),
    text: z.string().optional().describe('paste: the text to paste.'),
    bracketed: z.boolean().optional().describe('paste: wrap in bracketed-paste markers (default: when the application enabled them).'),
    input: z
      .strictObject({
        confirm: z.boolean().optional(),
        text: z.string().optional(),
        eof: z.literal(true).optional(),
        remember: z
          .enum(['command', 'prefix'])
          .optional()
          .describe('with confirm:true on an approval: remember the answer as an allow rule for the scope, for this exact command or for its name and first word (e.g. git push)'),
      })
      .refine((i) => [i.confirm !== undefined, i.text !== undefined, i.eof !== undefined].filter(Boolean).length === 1, {
        message: 'give exactly one of confirm, text or eof',
      })
      .optional()
      .describe('resume: the answer to the pending interrupt: {confirm: true|false}, {text: "..."} or {eof: true}; an approval takes {confirm: true|false}, and a person may add remember: "command" | "prefix".'),
    cols: z.number().int().min(1).max(1000).optional().describe('resize: terminal columns.'),
    rows: z.number().int().min(1).max(1000).optional().describe('resize: terminal rows.'),
    signal: z
      .string()
      .refine((s) => SIGNALS.includes(s.toUpperCase().startsWith('SIG') ? s.toUpperCase() : `SIG${s.toUpperCase()}`), {
        message: 'unknown signal; use a name such as SIGTERM, SIGINT, SIGHUP or SIGKILL',
      })
      .optional()
      .describe('kill: the stop signal (default SIGTERM; SIGKILL follows after the grace). signal: the signal to deliver.'),
    graceMs: z.number().int().min(0).optional().describe('kill: ms between the stop signal and SIGKILL.'),
    reason: z.string().max(500).optional().describe('kill: why it is stopped; written to the stop file and kept in the final record (stop.reason).'),
    all: z.boolean().optional().describe('kill: stop every running session of the scope.'),
    paths: z.array(z.string().min(1)).min(1).max(10_000).optional().describe('changes, apply: only these paths (relative to their workspace, or absolute under it).'),
    stat: z.boolean().optional().describe('changes: the list of paths and totals, without the diff.'),
    force: z.boolean().optional().describe('apply: also overwrite paths the workspace changed since the session first wrote them (conflicts).'),
    discard: z.boolean().optional().describe('clear, remove: also drop the changes a review session still holds (refused otherwise).'),
  })
  .describe('Manage sessions started by exec: list, poll, log, write, kill, clear, remove, wait.');

export type ProcessParams = z.output<typeof ProcessParamsSchema>;

export function normalizeSignal(s: string): NodeJS.Signals {
  const up = s.toUpperCase();
  return (up.startsWith('SIG') ? up : `SIG${up}`) as NodeJS.Signals;
}
