import { z } from 'zod';

const MIN_SESSION_MEMORY_BYTES = 16 * 1024 * 1024;

/**
 * Per-session limits (SPEC §15), the one shape of `limits.session`, `scopes.NAME.limits` and an
 * exec's `limits`: enforced on the session's cgroup as a whole, not per process.
 */
export const SessionLimitsSchema = z
  .strictObject({
    memoryBytes: z
      .number()
      .int()
      .min(MIN_SESSION_MEMORY_BYTES, `must be at least ${MIN_SESSION_MEMORY_BYTES} (16 MiB): below that not even the shell starts`)
      .optional()
      .describe('Memory of the whole session (memory.max, no swap); over it the kernel kills a process of it and the session fails with reason "memory_limit".'),
    processes: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Processes and threads the session may have at once (pids.max); a fork past it fails, and a session that then fails has reason "process_limit".'),
    cpuPercent: z
      .number()
      .min(1)
      .max(100_000)
      .optional()
      .describe('CPU time as a percent of one CPU (cpu.max; 200 = two CPUs); the session is slowed, never killed.'),
  })
  .describe('Limits of this session as a whole, within those of its scope (more is refused).');

export type SessionLimits = z.infer<typeof SessionLimitsSchema>;
