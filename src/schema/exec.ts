import { z } from 'zod';

/** The longest timeout a timer can hold (2^31-1 ms). */
export const MAX_TIMEOUT_SEC = 2_147_483;

export const ExecParamsSchema = z
  .strictObject({
    command: z.string().min(1, 'command must not be empty').describe('Shell command to run (with $SHELL -c).'),
    workdir: z.string().min(1).optional().describe("Working directory; must exist. Default: the daemon's cwd."),
    env: z
      .record(z.string(), z.string())
      .optional()
      .describe('Environment variables merged over the daemon environment. PATH, LD_*, DYLD_*, BASH_FUNC_* and NODE_OPTIONS are refused.'),
    yieldMs: z
      .number()
      .optional()
      .describe('Wait this long (ms) for the command to finish before returning status "running"; clamped to 10..120000.'),
    background: z.boolean().optional().describe('Return status "running" at once and keep the command going.'),
    timeout: z
      .number()
      .min(0)
      .max(MAX_TIMEOUT_SEC, `timeout is at most ${MAX_TIMEOUT_SEC} seconds (about 24 days); use 0 for none`)
      .optional()
      .describe('Seconds until the whole process group is terminated, also after backgrounding; 0 = none.'),
    pty: z.boolean().optional().describe('Run under a pseudo-terminal (120x30) for programs that need one.'),
    stdin: z
      .enum(['pipe', 'null'])
      .optional()
      .describe('"pipe" (default) keeps stdin open for process write; "null" makes the command read end-of-input at once.'),
    elevated: z.boolean().optional().describe("Run outside the sandbox and resource limits; the scope's policy refuses it (the default), asks a person, or allows it."),
    key: z.string().min(1).optional().describe('Thread key: at most one running session per key and scope.'),
    ifRunning: z
      .enum(['replace', 'reject', 'keep'])
      .optional()
      .describe('With key, when a session of that key is running: replace it (default), reject, or keep it and return it.'),
    name: z.string().min(1).max(200).optional().describe('A label; default: the verb and its first argument.'),
  })
  .describe(
    'Run a shell command. Returns its output if it finishes within yieldMs, else status "running" with a sessionId to use with the process tool.',
  );

export type ExecParams = z.output<typeof ExecParamsSchema>;
