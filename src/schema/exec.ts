import { z } from 'zod';
import { SessionLimitsSchema } from '../base/session-limits.js';

/** A persistent shell's name (SPEC §20). */
export const SHELL_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** The longest timeout a timer can hold (2^31-1 ms). */
export const MAX_TIMEOUT_SEC = 2_147_483;

/** The longest session name, in UTF-16 code units (what zod's string max counts). */
export const MAX_NAME_CHARS = 200;

/** An RE2 pattern; whether it compiles is checked where it is used (tools/exec.ts), naming the field. */
const pattern = (what: string) => z.string().min(1, `${what} must not be empty`);

export const WaitForSchema = z.union([
  z.strictObject({
    port: z.number().int().min(1).max(65535).describe('A TCP port that accepts a connection once the command is ready.'),
    host: z.string().min(1).optional().describe('Where to connect; default 127.0.0.1 or ::1.'),
  }),
  z.strictObject({ output: pattern('waitFor.output').describe('An RE2 pattern a line of output matches once the command is ready.') }),
  z.strictObject({
    http: z
      .string()
      .url('waitFor.http must be a URL such as http://127.0.0.1:3000/health')
      .refine((u) => /^https?:/i.test(u), 'waitFor.http must be an http:// or https:// URL')
      .describe('A URL a GET of which answers once the command is ready.'),
    status: z.number().int().min(100).max(599).optional().describe('The status that means ready; default any 2xx or 3xx.'),
  }),
  z.strictObject({ file: z.string().min(1).describe('A path (relative to workdir) that exists once the command is ready.') }),
]);

/** yieldOnQuietMs's bounds: as the yield's (config's YIELD_MS_RANGE), a quiet longer than the longest yield never ends a wait. */
export const QUIET_MS_RANGE = [10, 120_000] as const;

export const NotifySchema = z.union([z.enum(['exit', 'failure', 'never']), z.strictObject({ match: pattern('notify.match') })]);

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
    yieldOnQuietMs: z
      .number()
      .int('yieldOnQuietMs must be a whole number of milliseconds')
      .min(QUIET_MS_RANGE[0], `yieldOnQuietMs is at least ${QUIET_MS_RANGE[0]} ms`)
      .max(QUIET_MS_RANGE[1], `yieldOnQuietMs is at most ${QUIET_MS_RANGE[1]} ms (the longest yield); leave it out to wait for the yield alone`)
      .optional()
      .describe(
        'Also return status "running" (the command goes on) once it has printed nothing for this many ms, counted from its start or its last output; yieldMs still bounds the wait. The answer says which ended the wait: yielded "quiet" or "time".',
      ),
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
    name: z.string().min(1).max(MAX_NAME_CHARS).optional().describe('A label; default: the verb and its first argument.'),
    waitFor: WaitForSchema.optional().describe(
      'Readiness: answer "running" with ready: true as soon as this holds (a TCP port answers, an output line matches, an HTTP GET answers, a file exists), or as usual if the command ends or asks first; yieldMs bounds the wait.',
    ),
    notify: NotifySchema.optional().describe(
      'Which ends of a backgrounded session are notifications (the exited event carries summary): "exit" (default), "failure" (only when it did not complete with 0), "never", or {match: RE2} to also send an output_match event for each matching line (rate-limited, counted).',
    ),
    limits: SessionLimitsSchema.optional(),
    shell: z
      .string()
      .regex(SHELL_NAME, 'shell must be 1-64 letters, digits, ".", "_" or "-"')
      .optional()
      .describe(
        "Run in the scope's persistent bash of this name (made on first use with this exec's settings): cd, variables, functions, aliases and set options last from one command to the next; one command at a time.",
      ),
    changes: z
      .enum(['direct', 'review'])
      .optional()
      .describe(
        '"review" holds what the command writes in the workspaces for review (see it with process changes, then apply or discard); "direct" writes them as it runs. Default: the scope\'s setting (sandbox.changes), "direct" unless an operator set it.',
      ),
  })
  .describe(
    'Run a shell command. Returns its output if it finishes within yieldMs, else status "running" with a sessionId to use with the process tool.',
  );

export type ExecParams = z.output<typeof ExecParamsSchema>;

/** What an exec waits for to be ready (SPEC §5 `waitFor`). */
export type WaitFor = z.output<typeof WaitForSchema>;

/** `waitFor` in words, for `text` and the `ready` event: "port 3000 answers". */
export function describeWaitFor(w: WaitFor): string {
  if ('port' in w) return `port ${w.port}${w.host ? ` on ${w.host}` : ''} answers`;
  if ('output' in w) return `a line of output matches /${w.output}/`;
  if ('http' in w) return `GET ${w.http} answers ${w.status ?? '2xx or 3xx'}`;
  return `${w.file} exists`;
}
